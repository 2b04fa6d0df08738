"""Beside an answer's options stands what its sources say they do, so a real option used wrongly shows."""

from app.copilot.definitions import MAX_SHOWN, defined_options, entries_of, first_sentence
from app.copilot.events import GroundingItem, Passage
from app.copilot.grounding import check_grounding
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.web.render import details_html

SRUN = Passage(
    1,
    "- --begin=<time>\n- Defer initiation of this job until the specified time. It accepts times of the form HH:MM.\n\n"
    "- --time-min=<time>\n- Set a minimum time limit on the job allocation. If specified, the job may have its "
    "--time limit lowered.\n\n"
    "- -M, --clusters=<string>\n- Clusters to issue commands to.",
    "srun.html",
    "srun",
    "OPTIONS",
)
SCONTROL = Passage(
    2,
    "- -M, --clusters=<string>\n- The cluster to issue commands to. Only one cluster name may be specified.\n\n"
    "- suspend <job_list>\n- Suspend a running job.",
    "scontrol.html",
    "scontrol",
    "OPTIONS",
)
SLURM_CONF = Passage(
    3,
    "- InactiveLimit\n- The interval, in seconds, after which a non-responsive job allocation command will "
    "result in the job being terminated.\n\n"
    "- MaxNodes=<count>\n- Maximum count of nodes per job in the partition. Format is <n>.",
    "slurm.conf.html",
    "slurm.conf",
    "PARAMETERS",
)
QUESTION = "How do I make a job start no earlier than a given date and time?"


def _defined(answer: str, passages=(SRUN, SCONTROL, SLURM_CONF)):
    final = final_from_text(QUESTION, list(passages), answer, "eos")
    return final, {d.name: d for d in final.definitions}


def test_an_option_used_for_the_wrong_purpose_stands_beside_its_sources_definition():
    final, defined = _defined("[1] Set a minimum start time:\n\n```\nsrun --time-min=10 script.sh\n```")
    assert list(defined) == ["--time-min"]  # not its value, not the script
    assert defined["--time-min"].source == 1 and defined["--time-min"].title == "srun"
    assert defined["--time-min"].text == "Set a minimum time limit on the job allocation."  # first sentence
    notes = [text for level, text in check_notes(final, code=lambda text: f"`{text}`") if level == "note"]
    assert "`--time-min`, as [1] (srun) defines it: “Set a minimum time limit on the job allocation.”" in notes


def _found(*lines: str) -> dict:
    items = [GroundingItem(line, "command", True) for line in lines]
    return {d.name: d for d in defined_options(items, [SRUN, SCONTROL, SLURM_CONF])}


def test_a_one_letter_option_is_explained_only_from_its_own_tools_page():
    defined = _found("scontrol -M c1 suspend 42", "srun -M c1 hostname")
    assert defined["-M"].source == 2  # scontrol's own -M, met first
    assert defined["suspend"].text == "Suspend a running job."
    assert _found("srun -M c1 hostname")["-M"].text == "Clusters to issue commands to."
    # sbatch's page is not among the sources, and srun's and scontrol's -M say nothing of sbatch's
    assert "-M" not in _found("sbatch -M c1 job.sh") and "-M" not in _found("-M c1")
    _, defined = _defined("[1] Run `sbatch --time-min=10 job.sh`.")
    assert defined["--time-min"].title == "srun"  # a long option means the same in sibling tools; shown with its page


def test_settings_and_bare_names_are_looked_up_and_invented_items_are_not():
    _, defined = _defined("[3] Set `MaxNodes=4` and raise `InactiveLimit`.")
    assert [d.name for d in defined.values()] == ["MaxNodes", "InactiveLimit"]
    assert defined["MaxNodes"].term == "MaxNodes=<count>"
    _, defined = _defined("[3] The job has reached the system InactiveLimit, not MaxNodes.")
    assert list(defined) == ["InactiveLimit", "MaxNodes"]  # a setting named in prose is explained too
    codes = Passage(
        4, "Reasons:\nQOSMaxJobsPerUserLimit — The per-user job limit of the QOS is met.", "r.html", "Codes"
    )
    final = final_from_text(
        "Why is my job pending with reason QOSMaxJobsPerUserLimit?", [codes], "[4] It waits.", "eos"
    )
    assert [(d.name, d.text) for d in final.definitions] == [
        ("QOSMaxJobsPerUserLimit", "The per-user job limit of the QOS is met.")  # the term the question asks about
    ]
    _, defined = _defined("[1] Run `srun --begin-late=noon --clusters=x`.")
    assert defined == {}  # the line is in no source: it is flagged, and a lookalike's definition lends it no credit


def test_definitions_are_capped_and_each_name_is_given_once():
    entries = "\n\n".join(f"- --opt{i}\n- Option number {i}." for i in range(MAX_SHOWN + 3))
    page = Passage(1, entries, "tool.html", "tool", "OPTIONS")
    answer = "[1] " + " ".join(f"`tool --opt{i}`" for i in range(MAX_SHOWN + 3)) + " and `tool --opt0` again."
    final = final_from_text(QUESTION, [page], answer, "eos")
    assert [d.name for d in final.definitions] == [f"--opt{i}" for i in range(MAX_SHOWN)]


def test_a_withheld_answer_explains_nothing_and_the_web_escapes_the_pages_words():
    withheld = final_from_text(QUESTION, [SRUN], "Run `srun --time-min=10`.", "withheld", "cites no source")
    assert withheld.withheld and withheld.definitions == []
    final = final_from_text(QUESTION, [SLURM_CONF], "[3] Set `MaxNodes=4`.", "eos")
    shown = details_html(final)
    assert "What the sources say these terms mean" in shown
    assert (
        "<code>MaxNodes</code>, as [3] (slurm.conf) defines it: “Maximum count of nodes per job in the partition.”"
        in shown
    )


def test_first_sentence_stops_at_a_sentence_end_not_at_an_abbreviation_or_a_version():
    shown = "Run it e.g. daily on the v2.1 nodes of every cluster."
    assert first_sentence(shown + " Then more.") == shown
    assert first_sentence("x" * 300).endswith("…") and len(first_sentence("x" * 300)) == 160
    assert first_sentence("Format is <job>. Stat this job step or a list of steps. More.") == (
        "Format is <job>. Stat this job step or a list of steps."  # a short first sentence says little alone
    )


def test_lists_of_sentences_or_of_name_and_text_lines_are_not_entries():
    steps = "- Execute ResumeProgram with the node names.\n- Once slurmd responds, start the job."
    fields = "- StoragePort: the port the database listens on.\n- StorageType: the storage mechanism."
    reports = "- cluster Utilization\n- - Cluster utilization.\n\n- U\n- is the normalized usage.\n\n- --wait\n- --wide"
    page = Passage(1, "\n\n".join([steps, fields, reports]), "power.html", "sreport")
    items = [GroundingItem("sreport cluster Utilization U=1 ResumeProgram=x StoragePort=1 --wait", "command", True)]
    defined = defined_options(items, [page])
    assert [(d.name, d.text) for d in defined] == [("Utilization", "Cluster utilization.")]


def test_no_definition_list_no_definitions():
    prose = Passage(1, "Use srun --time-min to lower the limit.", "faq.html", "FAQ", "Jobs")
    item = GroundingItem("--time-min", "option", True)
    assert defined_options([item], [prose]) == []


NODES = Passage(  # scontrol's node State entry, with its values nested as the HTML reader writes them
    4,
    "Example: scontrol update NodeName=<name> State=DRAIN\n\n"
    "- State=<state>\n- Assign one of the following states/actions to the node(s) specified by the update command.\n"
    "    - CANCEL_REBOOT\n    - Cancels a pending reboot on the node.\n\n"
    "    - DOWN\n    - Stop all running and suspended jobs and make the node unavailable for new jobs.\n\n"
    "    - DRAIN\n    - Indicates that no new jobs may be started on this node. Existing jobs are allowed to run.\n\n"
    "- Weight=<weight>\n- Weight of the node for scheduling purposes.\n\n"
    "- RESUME\n- Not one of State's values: a top-level entry after the list.",
    "scontrol.html",
    "scontrol",
    "NODES",
)


def test_a_value_the_key_lists_gets_its_own_definition_right_after_the_keys():
    line = "scontrol update NodeName=n1 State=DOWN Weight=5"
    defined = defined_options([GroundingItem(line, "code", True)], [NODES])
    assert [d.name for d in defined] == ["State", "State=DOWN", "Weight"]
    down = defined[1]
    assert (down.term, down.source, down.title) == ("DOWN", 4, "scontrol")
    assert down.text == "Stop all running and suspended jobs and make the node unavailable for new jobs."


def test_values_are_matched_in_any_case_and_only_among_the_keys_own_list():
    def named(line: str) -> list[str]:
        return [d.name for d in defined_options([GroundingItem(line, "code", True)], [NODES])]

    assert named("scontrol update NodeName=n1 State=drain") == ["State", "State=drain"]  # Slurm reads any case
    assert named("scontrol update NodeName=n1 State=RESUME") == ["State"]  # an entry, but not in State's list
    assert named("scontrol update NodeName=n1 State=<state>") == ["State"]  # a placeholder is no value
    assert named("scontrol update NodeName=n1 Weight=DOWN") == ["Weight"]  # Weight lists no values


DEPENDENCY = Passage(  # srun's --dependency entry, its values nested with their arguments
    2,
    "- -d, --dependency=<dependency_list>\n- Defer the start of this job until the dependencies have been "
    "satisfied.\n"
    "    - afterok:job_id[:jobid...]\n    - This job can begin execution after the jobs have successfully "
    "executed (ran to completion with an exit code of zero).\n\n"
    "    - afternotok:job_id[:jobid...]\n    - This job can begin execution after the specified jobs have terminated "
    "in some failed state (non-zero exit code, node failure, timed out, etc).",
    "srun.html",
    "srun",
    "OPTIONS",
)


def test_a_value_with_arguments_is_defined_by_its_name():
    # fresh14 (session 60): asked for a cleanup job that runs only if the main one fails, an answer used afterok
    line = "srun --dependency=afterok:123 cleanup.sh"
    defined = defined_options([GroundingItem(line, "code", True)], [DEPENDENCY])
    assert [d.name for d in defined] == ["--dependency", "--dependency=afterok"]
    assert defined[1].text.startswith("This job can begin execution after the jobs have successfully")
    assert [
        d.name for d in defined_options([GroundingItem("srun --dependency=123:4", "code", True)], [DEPENDENCY])
    ] == ["--dependency"]  # no name before the colon


def test_a_description_the_reader_wrapped_over_lines_is_read_whole_with_its_values_after_it():
    # srun's --dependency as the HTML reader writes it: the description wrapped, then its values nested
    wrapped = Passage(
        2,
        "- -d, --dependency=<dependency_list>\n- Defer the start of this job until the dependencies have been\n"
        "satisfied completed. This option does not apply to job steps.\n"
        "    - afterok:job_id[:jobid...]\n    - This job can begin execution after the jobs have successfully "
        "executed.\n\n- --deadline=<OPT>\n- Remove the job if no ending is possible.",
        "srun.html",
        "srun",
        "OPTIONS",
    )
    dependency, deadline = entries_of(wrapped)
    assert dependency.text == "Defer the start of this job until the dependencies have been satisfied completed."
    assert [term for _, term, _ in dependency.values] == ["afterok:job_id[:jobid...]"]
    assert deadline.text == "Remove the job if no ending is possible."  # the next entry is not read as a wrapped line


def test_a_nested_entry_whose_parent_the_passage_does_not_hold_is_an_entry_of_its_own():
    # a chunk that starts inside srun's list of --dependency values, the first term's indent cut by the chunker
    cut = Passage(
        3,
        "- afterok:job_id[:jobid...]\n    - This job can begin execution after the jobs have successfully executed.\n\n"
        "    - singleton\n    - This job can begin execution after any previously launched jobs sharing the same job "
        "name and user have terminated.",
        "srun.html",
        "srun",
        "OPTIONS",
    )
    entries = list(entries_of(cut))
    assert [sorted(e.names) for e in entries] == [["afterok"], ["singleton"]] and all(e.orphan for e in entries)
    (defined,) = defined_options([GroundingItem("afterok", "code", True)], [cut])
    assert (defined.name, defined.source) == ("afterok", 3)
    assert not any(e.orphan for e in entries_of(DEPENDENCY))  # values under their parent stay its values


def test_a_passage_that_goes_on_with_an_options_list_lends_the_labelled_option_its_values():
    # the chunker's label names the entry a chunk goes on with; its list of values starts the chunk, without the key
    cut = Passage(
        3,
        "- afterok:job_id[:jobid...]\n    - This job can begin execution after the jobs have successfully executed.\n\n"
        "    - singleton\n      -       - This job can begin execution after any previous job of that name ended.",
        "srun.html",
        "srun",
        "OPTIONS",
        entry="-d, --dependency=<dependency_list>",
    )
    defined = defined_options([GroundingItem("srun --dependency=singleton job.sh", "code", True)], [cut])
    # no definition of --dependency itself: the passage does not hold its description
    assert [(d.name, d.text) for d in defined] == [
        ("--dependency=singleton", "This job can begin execution after any previous job of that name ended.")
    ]


def test_a_two_letter_code_the_question_asks_about_is_defined_beside_a_neighbours_words():
    codes = Passage(
        1,
        "- CF CONFIGURING\n- Job has been allocated resources, but are waiting for them to become ready for use.\n"
        "- CG COMPLETING\n- Job is in the process of completing. Some processes on some nodes may still be active.",
        "squeue.html",
        "squeue",
        "JOB STATE CODES",
    )
    # fresh16 (session 60): asked about CF, the answer gave CG's description
    answer = "[1] The job is in the process of completing. Some processes on some nodes may still be active."
    final = final_from_text("A job shows the state code CF in squeue. What is it doing?", [codes], answer, "eos")
    assert [(d.name, d.quoted != "") for d in final.definitions] == [("CG", True), ("CF", False)]
    plain = final_from_text("Is my job OK? It says so in squeue.", [codes], answer, "eos")
    assert [d.name for d in plain.definitions] == ["CG"]  # OK is no code any entry is headed by


def test_a_bare_word_of_code_that_an_entry_lists_as_a_value_is_defined_as_that_value():
    # fresh13 (session 59): "Use the `afterok` clause ... regardless of A's success or failure"
    defined = defined_options([GroundingItem("afterok", "code", True)], [DEPENDENCY])
    assert [(d.name, d.term, d.source) for d in defined] == [("afterok", "afterok:job_id[:jobid...]", 2)]
    assert defined[0].text.startswith("This job can begin execution after the jobs have successfully")
    assert defined_options([GroundingItem("afterok", "code", False)], [DEPENDENCY]) == []  # an invented item: no credit
    other = Passage(3, DEPENDENCY.text.replace("(ran to completion", "(exit code 0"), "sbatch.html", "sbatch", "")
    assert defined_options([GroundingItem("afterok", "code", True)], [DEPENDENCY, other]) == []  # listed two ways


def test_the_value_shows_in_the_notes():
    answer = "[4] Stop new jobs:\n\n```\nscontrol update NodeName=<name> State=DOWN\n```"  # found: NODES' words
    final, defined = _defined(answer, [NODES])
    assert "State=DOWN" in defined
    notes = [text for level, text in check_notes(final, code=lambda text: f"`{text}`") if level == "note"]
    assert "`State=DOWN`, as [4] (scontrol) defines it: “Stop all running and suspended jobs" in " ".join(notes)


SQUEUE_FORMAT = Passage(
    5,
    "- -o, --format=<output_format>\n- Specify the information to be displayed.\n"
    "      - %i\n      - Job or job step id.\n"
    "      - %S\n      - Actual or expected start time of the job or job step. (Valid for jobs and job steps)\n"
    "      - %T\n      - Job state in extended form.\n",
    "squeue.html",
    "squeue",
    "OPTIONS",
)
SINFO_FORMAT = Passage(6, "      - %S\n      - Allowed allocating nodes.\n", "sinfo.html", "sinfo", "OPTIONS")


def test_a_format_specifier_is_explained_from_its_own_tools_page():
    """Seen in the chat (session 58): `%i %u %S %R` for "id, user, state and reason"; `%S` is the start time."""
    answer = "[5] The format string is:\n\n```\n%i %u %S %R\n```\n\nThis includes the state (%S)."
    meant = {d.name: d.text for d in defined_options(check_grounding(answer, [SQUEUE_FORMAT.text]), [SQUEUE_FORMAT])}
    assert meant == {"%i": "Job or job step id.", "%S": "Actual or expected start time of the job or job step."}
    both = [SQUEUE_FORMAT, SINFO_FORMAT]  # %S means another thing in sinfo: only a line's own tool decides
    texts = [p.text for p in both]
    unsure = {d.name: d.text for d in defined_options(check_grounding(answer, texts, numbers=[5, 6]), both, answer)}
    assert "%S" not in unsure and unsure["%i"] == "Job or job step id."  # %i: one page defines it
    line = '[5] Run `squeue -o "%.18i %S"`.'
    meant = {d.name: d.text for d in defined_options(check_grounding(line, texts, numbers=[5, 6]), both, line)}
    assert meant["%S"] == "Actual or expected start time of the job or job step."
