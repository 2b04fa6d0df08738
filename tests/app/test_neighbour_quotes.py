"""An answer that quotes the description of an entry it never names is told whose words they are."""

from app.copilot.events import Passage
from app.copilot.neighbour_quotes import neighbour_quotes
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.web.render import details_html

SEE = "See the update node command in the scontrol(1) man page or the slurm.conf(5) man page for more information."
STATES = Passage(
    4,
    "- DRAINING\n- The node is currently executing a job, but will not be allocated additional jobs. The node state "
    f"will be changed to state DRAINED when the last job on it completes. {SEE}\n\n"
    "- FAIL\n- The node is expected to fail soon and is unavailable for use per system administrator request. "
    f"{SEE}\n\n"
    "- FAILING\n- The node is currently executing a job, but is expected to fail soon and is unavailable for use "
    f"per system administrator request. {SEE}",
    "sinfo.html",
    "sinfo",
    "NODE STATE CODES",
)
STEPS = Passage(
    5,
    "- Check the node\n- Log in to the node and look at the processes that are still running there.\n\n"
    "- Resume it\n- Return the node to service once nothing is left running on it.",
    "runbook.md",
    "Node runbook",
)
ASKED = "A node shows state DRAIN with reason 'Kill task failed'. What does that mean?"
FAILING_WORDS = "[4] The node is currently executing a job, but is expected to fail soon and is unavailable for use."


def test_the_neighbours_description_quoted_for_the_state_asked_about_is_named():
    (quoted,) = neighbour_quotes(FAILING_WORDS, [STATES], ASKED)
    assert (quoted.name, quoted.source, quoted.title) == ("FAILING", 4, "sinfo")
    assert quoted.quoted.startswith("The node is currently executing a job, but is expected to fail soon")
    final = final_from_text(ASKED, [STATES], FAILING_WORDS, "eos")
    notes = [text for level, text in check_notes(final, code=lambda text: f"`{text}`") if level == "note"]
    assert any(
        "is how [4] (sinfo) describes `FAILING`, which neither the question nor the answer names" in n for n in notes
    )
    assert "describes <code>FAILING</code>" in details_html(final)


def test_a_named_entry_is_not_reported():
    named = FAILING_WORDS + " A FAILING node will be drained by the administrator."
    assert neighbour_quotes(named, [STATES], ASKED) == []
    assert neighbour_quotes(FAILING_WORDS, [STATES], "What does FAILING mean for a node?") == []
    # a code is named by a word it starts with, in any case: "drain" names DRAINING
    draining = "[4] The node is currently executing a job, but will not be allocated additional jobs."
    assert neighbour_quotes(draining, [STATES], ASKED) == []


def test_words_several_entries_share_or_a_short_run_are_nobodys():
    assert neighbour_quotes(f"[4] {SEE}", [STATES], "How do I change a node's state?") == []
    assert neighbour_quotes("[4] The node is currently executing a job.", [STATES], "What is a busy node?") == []


def test_a_list_of_plain_words_is_no_table_of_codes():
    answer = "[5] Log in to the node and look at the processes that are still running there."
    assert neighbour_quotes(answer, [STEPS], "What do I do with a stuck node?") == []


def test_an_option_is_named_exactly():
    srun = Passage(
        1,
        "- -M, --clusters=<string>\n- Clusters to issue commands to. Multiple cluster names may be comma separated.\n\n"
        "- -m, --distribution=<value>\n- Specify alternate distribution methods for remote processes.",
        "srun.html",
        "srun",
    )
    answer = "[1] Use `-m` to list clusters to issue commands to. Multiple cluster names may be comma separated."
    (quoted,) = neighbour_quotes(answer, [srun], "How do I spread tasks over the nodes?")
    assert quoted.name == "-M" and quoted.term == "-M, --clusters=<string>"
    assert neighbour_quotes(answer.replace("`-m`", "`--clusters`"), [srun], "How do I spread tasks?") == []


def test_a_paragraph_that_shares_a_phrase_with_an_entry_is_not_the_entrys_words():
    power = Passage(
        2,
        "Slurm supports a mechanism to reduce power consumption on nodes that remain idle for an extended period "
        "of time. This is typically accomplished by reducing voltage and frequency.",
        "power_save.html",
        "Power Saving Guide",
    )
    conf = Passage(
        3,
        "- SuspendProgram\n- Program to be executed to place nodes that remain idle for an extended period of "
        "time. This program is executed with the names of the nodes.",
        "slurm.conf.html",
        "slurm.conf",
    )
    answer = (
        "[2] Slurm supports a mechanism to reduce power consumption on nodes that remain idle for an extended "
        "period of time. This is typically accomplished by reducing voltage and frequency."
    )
    assert neighbour_quotes(answer, [power, conf], "Can idle nodes be switched off?") == []


def test_a_long_option_is_named_by_its_bare_name_too():
    sbatch = Passage(
        2,
        '- --ignore-pbs\n- Ignore all "#PBS" and "#BSUB" options specified in the batch script.\n\n'
        "- -i, --input=<filename_pattern>\n- Instruct Slurm to connect the batch script's standard input directly "
        "to the file name specified.",
        "sbatch.html",
        "sbatch",
    )
    answer = (
        '[2] The "ignore-pbs" option will ignore all "#PBS" and "#BSUB" options specified in the batch script. '
        'The "input=<filename_pattern>" option will connect the batch script\'s standard input directly to the '
        "file name specified."
    )
    assert neighbour_quotes(answer, [sbatch], "Will my PBS scripts still work?") == []
    unnamed = answer.replace('"ignore-pbs"', '"pbs"').replace('"input=<filename_pattern>"', "this")
    assert {d.name for d in neighbour_quotes(unnamed, [sbatch], "Will my PBS scripts still work?")} == {
        "--ignore-pbs",
        "-i",
    }


# a chunk that starts inside squeue's list of --Format fields: the first term lost its indent, no parent entry
FIELDS = Passage(
    2,
    "- Partition\n    - Partition of the job or job step. (Valid for jobs and job steps)\n\n"
    "    - PendingTime\n    - The time (in seconds) between start time and submit time of the job. If the job has "
    "not started yet, then the time (in seconds) between now and the submit time of the job. (Valid for jobs only)",
    "squeue.html",
    "squeue",
    "OPTIONS",
)


def test_a_settings_words_quoted_for_another_are_its_own_though_a_plain_word_of_the_question_starts_it():
    # fresh15 (session 60): "pending" in the question had counted as naming PendingTime
    question = "How can I see the time from which a pending job became eligible to run?"
    answer = (
        '[2] The scontrol show job command shows the "EligibleTime" field, which indicates the time (in seconds) '
        "between start time and submit time of the job."
    )
    (quoted,) = neighbour_quotes(answer, [FIELDS], question)
    assert (quoted.name, quoted.source) == ("PendingTime", 2) and quoted.quoted.startswith("the time (in seconds)")
    named = [answer.replace("EligibleTime", "PendingTime"), answer.replace('"EligibleTime" field', "pending time")]
    assert [neighbour_quotes(text, [FIELDS], question) for text in named] == [[], []]
    assert neighbour_quotes(answer, [FIELDS], "Why is it PendingTimeLimit?") == []  # a setting that starts with it


def test_the_eval_records_the_neighbours_words_apart_from_definitions():
    final = final_from_text(ASKED, [STATES], FAILING_WORDS, "eos")
    record = answer_record(final, Question("r-2", ASKED))
    assert [name for name, _, _ in record["neighbour_quotes"]] == ["FAILING"]
    assert all(name != "FAILING" for name, _, _ in record["definitions"])
