"""A command the length limit cut mid-line is a warning in every front end, with the source's whole line."""

from app.copilot.cut_code import cut_code
from app.copilot.events import CutCode, Passage
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.slack.render import footer
from app.web.render import details_html

EXIT_CODES = Passage(
    1,
    "To tell them apart on HTCondor:\n\n```bash\ncondor_history -name ce01.example.org <cluster.proc> \\\n"
    "  -af ExitCode ExitBySignal ExitSignal MemoryUsage\n```",
    "job-exit-codes.md",
    "Job Failure Exit Codes",
    "Exit code 137 in detail",
)
QUESTION = "A job died with exit code 137. Is that our problem?"
CUT = (
    "[1] To tell them apart on HTCondor:\n\n```\ncondor_history -name ce01.example.org <cluster.proc> \\\n"
    "-af ExitCode Exit"
)
WRITTEN = "condor_history -name ce01.example.org <cluster.proc> -af ExitCode Exit"
WHOLE = "condor_history -name ce01.example.org <cluster.proc> -af ExitCode ExitBySignal ExitSignal MemoryUsage"


def test_the_command_a_length_cut_left_unfinished_is_named_with_the_line_a_source_writes_whole():
    assert cut_code(CUT, "length", [EXIT_CODES]) == CutCode(WRITTEN, 1, WHOLE)
    assert cut_code("Run `scontrol update Node", "length", [EXIT_CODES]) == CutCode("scontrol update Node")
    assert cut_code("It builds with:\n$ mpicc", "length", []) == CutCode("mpicc")  # a prompt's line is a command
    inside = Passage(2, "Use xmpicc -O2, or mpicc -o hello hello.c", "mpi.html", "MPI", "")
    assert cut_code("It builds with:\n$ mpicc", "length", [inside]) == CutCode("mpicc", 2, "mpicc -o hello hello.c")


def test_an_answer_that_ended_or_was_cut_in_prose_or_after_a_whole_line_is_not():
    assert cut_code(CUT, "eos", [EXIT_CODES]) is None
    assert cut_code(CUT + "\n", "length", [EXIT_CODES]) is None  # the line ended; the next had not begun
    assert cut_code("[1] It means the process received SIG", "length", [EXIT_CODES]) is None
    assert cut_code(CUT, "length", [EXIT_CODES], shown="[1] To tell them apart on HTCondor:") is None  # not shown


def test_every_front_end_warns_first_and_the_eval_records_it():
    final = final_from_text(QUESTION, [EXIT_CODES], CUT, "length")
    expected = (
        f"the length limit cut the answer in the middle of `{WRITTEN}`: do not run it as it stands; "
        f"[1] writes it whole: `{WHOLE}`"
    )
    assert check_notes(final, code=lambda text: f"`{text}`")[0] == ("warning", expected)
    page = details_html(final)
    assert "the length limit cut the answer in the middle of" in page and "ExitBySignal" in page
    assert answer_record(final, Question("q", QUESTION))["cut_code"] == [WRITTEN, 1]
    assert ":warning: the length limit cut the answer in the middle of" in footer(final)  # Slack
