"""A sentence telling the operator's own job what a source's example shows is reported in every front end."""

from app.copilot.events import ExampleFact, Passage
from app.copilot.example_facts import example_facts, named
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.slack.render import footer
from app.web.render import details_html, inert_html

SACCT = Passage(
    1,
    "- sacct -S11:20:00 -E11:25:00 -X -ojobid,start,end,state\n\nJobID Start End State\n2 11:20:00 11:21:13 COMPLETED",
    "sacct.html",
    "sacct",
    "EXAMPLES",
)
QUESTION = "How do I see why job 4512 is still pending?"
TOLD = "Job 4512 is still pending because it was PENDING from 11:20:00 until it started at 11:21:13."
ANSWER = f"[1] Look at its state:\n\n```\nsacct -S11:20:00 -E11:25:00 -X -ojobid,start,end,state\n```\n\n{TOLD} [1]"


def test_the_examples_values_told_of_the_questions_job_are_reported():
    assert example_facts(ANSWER, [SACCT], QUESTION) == [ExampleFact(TOLD, "job 4512", ("11:20:00", "11:21:13"), 1)]


def test_a_sentence_of_the_questions_values_alone_or_of_the_examples_alone_is_not():
    answers = [
        "[1] Run `sacct -j 4512` to see job 4512's state and reason.",  # the operator's own job, nothing else
        "[1] In the example the job ran from 11:20:00 to 11:21:13.",  # the example told as the example's
        "[1] Run `sacct -S11:20:00 -j 4512` for job 4512.",  # the example's time in code: example_values.py's
    ]
    assert [example_facts(answer, [SACCT], QUESTION) for answer in answers] == [[], [], []]
    assert example_facts(ANSWER, [SACCT], "Why is my job still pending?") == []  # the question names no value
    same_job = Passage(1, SACCT.text + "\nJob 4512 was submitted at 11:20:00.", "sacct.html", "sacct", "")
    assert example_facts(ANSWER, [same_job], QUESTION) == []  # the source's example is the very job


def test_every_front_end_warns_and_the_eval_records_it():
    final = final_from_text(QUESTION, [SACCT], ANSWER, "eos")
    expected = (
        "the answer tells your job 4512 what [1]'s example gives for its own (11:20:00, 11:21:13): "
        "no source can know that of job 4512; check it yourself"
    )
    assert ("warning", expected) in check_notes(final, code=str)
    assert inert_html(expected) in details_html(final)
    assert ":warning: the answer tells your job 4512 what [1]" in footer(final)  # Slack
    record = answer_record(final, Question("q", QUESTION))
    assert record["example_facts"] == [["job 4512", ["11:20:00", "11:21:13"], 1]]


def test_the_value_is_named_with_the_questions_word_for_it():
    assert named("c042", "Node c042 is stuck") == "node c042"
    assert named("18:00", "change its end to 18:00") == "18:00"


def test_values_no_source_gives_told_of_the_questions_job_are_reported_too():
    answer = "[1] Use `sacct -j 4512`. Job 4512 will start at 11:30:00 [1]."
    (told,) = example_facts(answer, [SACCT], QUESTION)
    assert (told.own, told.theirs, told.source) == ("job 4512", ("11:30:00",), 0)
    final = final_from_text(QUESTION, [SACCT], answer, "eos")
    expected = "the answer tells of your job 4512 what no source gives (11:30:00): check it yourself"
    assert ("warning", expected) in check_notes(final, code=str)
