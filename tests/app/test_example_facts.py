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
    record = warned_in_every_front_end(final, expected, QUESTION)
    assert record["example_facts"] == [["job 4512", ["11:20:00", "11:21:13"], 1]]


def warned_in_every_front_end(final, expected: str, question: str) -> dict:
    """Assert the chat, Slack and the CLI's notes warn with `expected`; the eval's record of the answer."""
    assert ("warning", expected) in check_notes(final, code=str)
    assert inert_html(expected) in details_html(final)
    assert f":warning: {expected}" in footer(final)  # Slack
    return answer_record(final, Question("q", question))


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


# --- a name or address reserved for documentation, given for "our" something ----------------------------------

TLS_SCENARIO = Passage(
    2,
    "The central server is central.example.net; clients forward to it on port 6514.",
    "tls_cert_scenario.html",
    "TLS scenario",
    "",
)
OUR_SERVER = "What is the IP address of our central log server?"


def test_a_documentation_examples_name_given_for_our_server_is_reported_in_every_front_end():
    # rsyslog's tutorial names its scenario's server central.example.net (session 64)
    answer = "[1] The central log server's IP address is central.example.net [2]."
    (told,) = example_facts(answer, [SACCT, TLS_SCENARIO], OUR_SERVER)
    assert (told.own, told.theirs, told.source, told.reserved) == (
        "central log server",
        ("central.example.net",),
        2,
        True,
    )
    final = final_from_text(OUR_SERVER, [SACCT, TLS_SCENARIO], answer, "eos")
    expected = (
        "the answer gives central.example.net for your central log server: [2] uses it as an example reserved for "
        "documentation, not a real one; the sources cannot know yours"
    )
    record = warned_in_every_front_end(final, expected, OUR_SERVER)
    assert record["example_facts"] == [["central log server", ["central.example.net"], 2]]


def test_reserved_addresses_of_the_models_own_are_reported_and_examples_to_adapt_are_not():
    invented = "[2] Your log server is `192.0.2.15`; mail ops@example.com if it is down."
    (told,) = example_facts(invented, [TLS_SCENARIO], "Where do we send our logs?")
    assert (told.own, told.theirs, told.source) == ("logs", ("192.0.2.15", "ops@example.com"), 0)
    to_adapt = '[2] Forward to it:\n\n```\naction(type="omfwd" Target="central.example.net" Port="6514")\n```\n'
    assert example_facts(to_adapt, [TLS_SCENARIO], OUR_SERVER) == []  # a block to adapt, not a fact told
    told_of_none = "[2] In the tutorial, the server is central.example.net."
    assert example_facts(told_of_none, [TLS_SCENARIO], "How do I set up a TLS log server?") == []  # no "our"
    near = Passage(3, "Clients send to 192.0.2.15 on port 514.", "tls.html", "TLS", "")
    (told,) = example_facts("[3] Your log server is 192.0.2.1.", [near], OUR_SERVER)
    assert told.source == 0  # the passage writes 192.0.2.15, not 192.0.2.1
    real = "[2] Our server is 192.168.2.11, logs.example.com.au or 2001:db9::1."  # none of them reserved
    assert example_facts(real, [TLS_SCENARIO], OUR_SERVER) == []
