"""An option of the answer is defined from its tool's own page in the index when no passage defines it."""

from types import SimpleNamespace

from app.copilot.events import Passage
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.copilot.tool_pages import ToolPages, read_tool_pages
from app.slack.render import footer
from app.web.render import details_html


def _chunk(title: str, text: str, heading: str = "OPTIONS") -> SimpleNamespace:
    return SimpleNamespace(text=text, source=f"{title}.html", title=title, heading=heading)


CHUNKS = [
    _chunk("srun", "- -l, --label\n- Prepend task number to lines of stdout/err. The --label option will prepend."),
    _chunk("srun", "- --multi-prog\n- Run a job with different programs and different arguments for each task."),
    # one name, two meanings on one tool's pages (a reused name in another section): neither is shown
    _chunk("sacctmgr", "- -n, --noheader\n- No header will be added to the beginning of the output."),
    _chunk("sacctmgr", "- -n\n- Do not print the names of the entities.", heading="LIST/SHOW"),
    # the same entry read twice (neighbour chunks overlap): still one meaning
    _chunk("sinfo", "- %m\n- Size of memory per node in megabytes."),
    _chunk("sinfo", "- %m\n- Size of memory per node in megabytes."),
    # a setting of a configuration page is no option; a guide's page has no tool
    _chunk("slurm.conf", "- TmpFS\n- Fully qualified pathname of the file system available to user jobs."),
    _chunk("Quick Start User Guide", "- -x, --exclude\n- A guide's list, not a tool's page."),
]
QUICKSTART = Passage(
    1, "Run three tasks and label their output:\n\nsrun -N3 -l /bin/hostname", "quickstart.html", "Quick Start", ""
)
QUESTION = "How do I start a controller program on task 0 and workers on the other tasks?"
ANSWER = "[1] Label the tasks:\n\n```\nsrun -N3 -l /bin/hostname\n```"


def test_each_tool_keeps_the_options_its_pages_define_one_way():
    options = read_tool_pages(CHUNKS).options
    assert set(options) == {"srun", "sacctmgr", "sinfo"}
    assert options["srun"]["-l"].text.startswith("Prepend task number") and options["srun"]["-l"].source == 0
    assert set(options["srun"]) == {"-l", "--label", "--multi-prog"}
    assert set(options["sacctmgr"]) == {"--noheader"}  # -n says two things
    assert options["sinfo"]["%m"].text == "Size of memory per node in megabytes."


def test_an_option_no_passage_defines_is_explained_from_its_tools_page_in_every_front_end():
    bare = final_from_text(QUESTION, [QUICKSTART], ANSWER, "eos")
    assert bare.definitions == []  # the passage runs `-l` but defines nothing
    final = final_from_text(QUESTION, [QUICKSTART], ANSWER, "eos", pages=read_tool_pages(CHUNKS))
    (defined,) = final.definitions
    assert (defined.name, defined.source, defined.title) == ("-l", 0, "srun")
    notes = [text for level, text in check_notes(final, code=lambda text: f"`{text}`") if level == "note"]
    said = "“Prepend task number to lines of stdout/err.”"
    assert f"`-l`, as srun's page defines it, in an entry no passage holds: {said}" in notes
    assert "srun's page defines it, in an entry no passage holds" in details_html(final)
    assert "srun's page defines it, in an entry no passage holds" in footer(final)  # Slack


def test_a_passage_of_the_tools_own_page_is_preferred_to_the_index():
    srun = Passage(2, "- -l, --label\n- Prepend the task number.", "srun.html", "srun", "OPTIONS")
    final = final_from_text(QUESTION, [QUICKSTART, srun], ANSWER, "eos", pages=read_tool_pages(CHUNKS))
    (defined,) = final.definitions
    assert (defined.source, defined.text) == (2, "Prepend the task number.")


def test_a_line_of_no_known_tool_and_an_ambiguous_option_get_nothing_from_the_index():
    pages = read_tool_pages(CHUNKS)
    passage = Passage(1, "List them: sacctmgr -n list users and mytool -l", "x.html", "Guide", "")
    answer = "[1] Run `sacctmgr -n list users` or `mytool -l`."
    assert final_from_text(QUESTION, [passage], answer, "eos", pages=pages).definitions == []


def test_empty_pages_change_nothing():
    assert read_tool_pages([]) == ToolPages()


NODES = "NODES - SPECIFICATIONS FOR UPDATE COMMAND"
PARTITIONS = "PARTITIONS - SPECIFICATIONS FOR CREATE, UPDATE, AND DELETE COMMANDS"
SECTIONS = [
    _chunk("scontrol", "- NodeName=<name>\n- Identify the node(s) to be updated.", NODES),
    _chunk(
        "scontrol",
        "- State=<state>\n- Assign one of the following states/actions to the node(s).\n\n"
        "    - DOWN\n    - Stop all running and suspended jobs and make the node unavailable for new jobs.",
        NODES,
    ),
    _chunk("scontrol", "- PartitionName=<name>\n- Identify the partition to be updated.", PARTITIONS),
    _chunk(
        "scontrol",
        "- State=<up|down>\n- Specify if jobs can be allocated nodes or queued in this partition.",
        PARTITIONS,
    ),
]
DRAIN_GUIDE = Passage(1, "Take it out: scontrol update NodeName=c1 State=DOWN", "guide.html", "Troubleshooting", "")


def test_a_setting_is_explained_from_the_one_section_of_its_tools_page_that_defines_the_lines_names():
    sections = read_tool_pages(SECTIONS).sections["scontrol"]
    assert set(sections) == {NODES, PARTITIONS} and sections[NODES]["State"].text.startswith("Assign one")
    answer = "[1] Run `scontrol update NodeName=c1 State=DOWN`."
    final = final_from_text(QUESTION, [DRAIN_GUIDE], answer, "eos", pages=read_tool_pages(SECTIONS))
    defined = {d.name: (d.source, d.text) for d in final.definitions}
    # the node's State, not the partition's
    assert defined["State"] == (0, "Assign one of the following states/actions to the node(s).")
    assert defined["State=DOWN"][1].startswith("Stop all running and suspended jobs")


def test_a_line_that_names_one_setting_of_several_sections_gets_nothing_from_them():
    answer = "[1] Run `scontrol update State=DOWN`."  # which section's State: not the line's to say
    final = final_from_text(QUESTION, [DRAIN_GUIDE], answer, "eos", pages=read_tool_pages(SECTIONS))
    assert final.definitions == []


DEFAULT_TIME = (
    "- DefaultTime=<time>\n- Run time limit used for jobs that don't specify a value. If not set, MaxTime is."
)
NAMES = [
    *SECTIONS,  # scontrol's State, defined two ways
    _chunk("slurm.conf", DEFAULT_TIME, "PARTITION CONFIGURATION"),
    _chunk("scontrol", DEFAULT_TIME.replace("If not set, MaxTime is.", "Format is as for MaxTime."), PARTITIONS),
    _chunk("sbatch", "- SLURM_ARRAY_TASK_COUNT\n- Total number of tasks in a job array.", "OUTPUT ENVIRONMENT"),
    _chunk("slurmd", "- slurm.conf\n- Readable to all users on all nodes. Must not be writable by others.", "FILES"),
]


def test_a_setting_or_variable_of_no_tools_line_is_explained_where_every_page_defines_it_one_way():
    names = read_tool_pages(NAMES).names
    assert (
        "State" not in names and names["DefaultTime"].text == "Run time limit used for jobs that don't specify a value."
    )
    # fresh14 (session 60): asked for the variable holding a job's task count; no passage defined the one given
    answer = "[1] Read SLURM_ARRAY_TASK_COUNT, or set `DefaultTime=1:00:00` in `slurm.conf`."
    guide = Passage(1, "A partition may set DefaultTime=30:00 in slurm.conf.", "guide.html", "Limits Guide", "")
    final = final_from_text(QUESTION, [guide], answer, "eos", pages=read_tool_pages(NAMES))
    defined = {d.name: (d.source, d.text) for d in final.definitions}
    assert defined == {
        "DefaultTime": (0, "Run time limit used for jobs that don't specify a value."),
        "SLURM_ARRAY_TASK_COUNT": (0, "Total number of tasks in a job array."),
    }  # not the file's permissions: slurm.conf is a file's name, no setting
    two_ways = final_from_text(QUESTION, [DRAIN_GUIDE], "[1] Set State to DOWN.", "eos", pages=read_tool_pages(NAMES))
    assert two_ways.definitions == []


def test_a_nested_entry_cut_from_its_parent_is_no_tools_name():
    cut = _chunk("squeue", "- Partition\n    - Partition of the job or job step. (Valid for jobs and job steps)")
    assert read_tool_pages([cut]).sections == {}  # which list it belongs to is unknown


def test_an_options_values_in_the_chunk_after_its_entry_are_lent_to_it():
    entry = _chunk("srun", "- --cpu-bind=[{quiet|verbose},]<type>\n- Bind tasks to CPUs.")
    values = _chunk("srun", "- threads\n      -       - Automatically generate masks binding tasks to threads.")
    values.entry = "--cpu-bind=[{quiet|verbose},]<type>"  # the chunker's label: the entry the chunk goes on with
    (lent,) = read_tool_pages([entry, values]).options["srun"]["--cpu-bind"].values
    assert lent == (frozenset({"THREADS"}), "threads", "Automatically generate masks binding tasks to threads.")
    guide = Passage(1, "Bind each task to a thread: srun --cpu-bind=threads a.out", "guide.html", "Affinity Guide", "")
    answer = "[1] Bind to threads:\n\n```\nsrun --cpu-bind=threads a.out\n```"
    final = final_from_text(QUESTION, [guide], answer, "eos", pages=read_tool_pages([entry, values]))
    defined = {d.name: (d.source, d.text) for d in final.definitions}
    assert defined["--cpu-bind=threads"] == (0, "Automatically generate masks binding tasks to threads.")
    # a passage that holds the list itself is named before the index's pages
    held = Passage(2, values.text, "srun.html", "srun", "OPTIONS", entry=values.entry)
    final = final_from_text(QUESTION, [guide, held], answer, "eos", pages=read_tool_pages([entry, values]))
    assert {d.name: d.source for d in final.definitions}["--cpu-bind=threads"] == 2


SOCKETS = (
    "- --sockets-per-node=<sockets>\n- Restrict node selection to nodes with at least the specified number of sockets."
)
OPTION_PAGES = [
    *(_chunk(tool, SOCKETS) for tool in ("sbatch", "salloc", "srun")),
    _chunk("sbatch", "- --exclusive\n- The job allocation can not share nodes with other running jobs."),
    _chunk("srun", "- --exclusive\n- This option applies to job and job step allocations."),  # another meaning
    _chunk("sbatch", "- -N, --nodes=<n>\n- Request that a minimum of minnodes nodes be allocated to this job."),
    _chunk("scontrol", "- -N, --nodes\n- Print the nodes' information."),  # -N means something else in each tool
]


def test_a_long_option_of_no_tools_line_is_explained_where_every_tool_defines_it_one_way():
    pages = read_tool_pages(OPTION_PAGES)
    assert "--exclusive" not in pages.names and "-N" not in pages.names and "--nodes" not in pages.names
    # fresh17 (session 61): asked how to have at least 16 CPUs on every node, an answer gave a bare option
    question = "How do I make sure every node my job gets has at least 16 CPUs?"
    answer = "[1] Use this option:\n\n```\n--sockets-per-node=16\n```\n\nIt also takes `--exclusive` and `-N 2`."
    guide = Passage(1, "Use --sockets-per-node=16 and --exclusive with -N 2.", "cpu.html", "CPU Management Guide", "")
    final = final_from_text(question, [guide], answer, "eos", pages=pages)
    defined = {d.name: (d.source, d.text) for d in final.definitions}
    assert defined == {
        "--sockets-per-node": (0, "Restrict node selection to nodes with at least the specified number of sockets.")
    }  # not --exclusive (srun says another thing), not the one-letter -N
    assert "at least the specified number of sockets" in details_html(final)
