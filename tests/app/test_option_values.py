"""A value given an option whose entry lists its values, and not that one, is a warning in every front end."""

from types import SimpleNamespace

from app.copilot.definitions import entries_of
from app.copilot.events import Passage, UnlistedValue
from app.copilot.option_values import listed_values
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.copilot.tool_pages import read_tool_pages
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.slack.render import footer
from app.web.render import details_html

STATE = (
    "- -t, --state=job_state_name\n- Restrict the scancel operation to jobs in this state. job_state_name may have a "
    'value of either "PENDING", "RUNNING" or "SUSPENDED".'
)
CHUNKS = [
    SimpleNamespace(title="scancel", heading="OPTIONS", source="scancel.html", text=STATE),
    SimpleNamespace(
        title="sbatch",
        heading="OPTIONS",
        source="sbatch.html",
        text="- --open-mode={append|truncate}\n- Open the output and error files using append or truncate mode as "
        "specified.\n- --mail-type=<type>\n- Notify user by email when certain event types occur. Valid type values "
        "are NONE, BEGIN, END, FAIL, REQUEUE, ALL (equivalent to BEGIN, END, FAIL, INVALID_DEPEND, REQUEUE, and "
        "STAGE_OUT), INVALID_DEPEND (dependency never satisfied) and TIME_LIMIT.",
    ),
]
USAGE = Passage(1, "Cancel the pending jobs of a user:\n\n$ scancel --user=alice --state=PENDING", "scancel.html",
                "scancel", "EXAMPLES")  # fmt: skip
QUESTION = "A user has 300 jobs, some running and some waiting. How do I cancel only the waiting ones?"
# fresh14 (session 60): every piece found (`--state` in a passage, `waiting` the question's word); scancel rejects it
WRONG = "[1] Cancel the waiting jobs:\n\n```\nscancel --user=alice --state=WAITING\n```"


def test_an_options_values_are_read_from_its_description_or_its_term():
    pages = read_tool_pages(CHUNKS)
    assert listed_values(pages.options["scancel"]["--state"]) == ("PENDING", "RUNNING", "SUSPENDED")
    assert listed_values(pages.options["sbatch"]["--open-mode"]) == ("APPEND", "TRUNCATE")
    mail = listed_values(pages.options["sbatch"]["--mail-type"])
    assert mail[:5] == ("NONE", "BEGIN", "END", "FAIL", "REQUEUE") and "TIME_LIMIT" in mail and "STAGE_OUT" in mail
    cut = Passage(2, STATE.removesuffix('"SUSPENDED".'), "scancel.html", "scancel", "OPTIONS")
    assert [listed_values(entry) for entry in entries_of(cut)] == [()]  # a list the passage cuts short lists nothing


def test_a_value_its_option_does_not_list_is_reported_and_a_listed_one_in_any_case_is_not():
    final = final_from_text(QUESTION, [USAGE], WRONG, "eos", pages=read_tool_pages(CHUNKS))
    states = ("PENDING", "RUNNING", "SUSPENDED")
    assert final.unlisted == [UnlistedValue("scancel", "--state", "WAITING", states, 0, "scancel")]
    fine = [
        "[1] Run:\n\n```\nscancel --user=alice --state=PENDING\n```",
        "[1] Run `scancel -t pending --user=alice`.",  # Slurm reads any case; the short form takes the next word
        "[1] Run `sbatch --mail-type=END,FAIL --open-mode=append job.sh`.",  # each word of a list is listed
    ]
    for answer in fine:
        assert final_from_text(QUESTION, [USAGE], answer, "eos", pages=read_tool_pages(CHUNKS)).unlisted == []
    mail = Passage(1, "$ sbatch --mail-type=END job.sh", "sbatch.html", "sbatch", "EXAMPLES")
    asked, wrong = "How do I get a mail on a failure?", "[1] Run `sbatch --mail-type=END,FAILURE job.sh`."
    (unlisted,) = final_from_text(asked, [mail], wrong, "eos", pages=read_tool_pages(CHUNKS)).unlisted
    assert (unlisted.option, unlisted.value) == ("--mail-type", "FAILURE")
    assert final_from_text(QUESTION, [USAGE], WRONG, "eos").unlisted == []  # an index without scancel's page


def test_every_front_end_warns_and_the_eval_records_it():
    final = final_from_text(QUESTION, [USAGE], WRONG, "eos", pages=read_tool_pages(CHUNKS))
    expected = (
        "the answer gives `--state` of `scancel` the value `WAITING`, which is not one of those scancel's page lists, "
        "in an entry no passage holds: PENDING, RUNNING or SUSPENDED; scancel will not take it as it stands"
    )
    notes = check_notes(final, code=lambda text: f"`{text}`")
    assert ("warning", expected) in notes
    assert not any("with your own values" in text for _, text in notes)  # WAITING is no value of the user's to check
    assert "the value <code>WAITING</code>, which is not one of those" in details_html(final)
    assert ":warning: the answer gives `--state` of `scancel` the value `WAITING`" in footer(final)  # Slack
    assert answer_record(final, Question("q", QUESTION))["unlisted_values"] == [["scancel", "--state", "WAITING", 0]]
