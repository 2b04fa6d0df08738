"""Two quantities of one unit compared the wrong way round are reported in every front end; right ones are not."""

from app.copilot.comparisons import wrong_comparisons
from app.copilot.events import Miscomparison, Passage
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.web.render import details_html

COOLING = Passage(
    1,
    "| Signal | WARNING | CRITICAL |\n| --- | --- | --- |\n"
    "| Inlet temperature (rack front) | **27 °C** | **32 °C**: start emergency shutdown of hall B |\n",
    "power-and-cooling-incident.md",
    "Power and Cooling Incident",
    "Thresholds and triggers",
)
# seen in the chat (session 58), after the runbook's right first steps
WRONG = "[1] The hall B inlet temperature is 31C, which is above the warning threshold of 32 °C [1]. Shut it down."


def test_a_comparison_that_arithmetic_contradicts_is_reported_as_the_sources_write_the_units():
    assert wrong_comparisons(WRONG) == [Miscomparison("31 °C", "above", "32 °C")]
    assert wrong_comparisons("12 minutes left is less than 15 min, so act now.") == []
    assert wrong_comparisons("The job used 6 GB, more than the 4 GB it asked for.") == []
    assert wrong_comparisons("The step used 4 GB, more than the 6 GB it asked for.") == [
        Miscomparison("4 GB", "above", "6 GB")
    ]
    assert wrong_comparisons("It is 40 minutes, below 1 hour.") == []  # one dimension, other units
    assert wrong_comparisons("Use 4 GB of memory for 8 hours, more than 2 nodes.") == []  # other dimensions
    assert wrong_comparisons("At 31 °C the hall runs for 2 hours, then at 32 °C shut down.") == []  # no comparing word
    assert wrong_comparisons("```\nif temp 31C above 32C\n```") == []  # code is not prose


def test_every_front_end_and_the_eval_report_it():
    final = final_from_text("the hall B inlet temperature is 31C, what do I do?", [COOLING], WRONG, "eos")
    note = "the answer says 31 °C is above 32 °C: it is not; check it before acting on it"
    assert ("warning", note) in check_notes(final, code=str)  # ask and Slack
    assert note in details_html(final)  # the web chat
    record = answer_record(final, Question("c-1", final.question))
    assert record["miscompared"] == [["31 °C", "above", "32 °C"]]
