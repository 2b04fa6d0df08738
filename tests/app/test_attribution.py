"""An item copied from one source under a sentence that cites another is found and shown as such."""

from copilot_fakes import FakeRetriever, script_answer

from app.copilot import AnswerOptions, Copilot, CopilotOptions, Final, ModelOptions, collect, loading
from app.copilot.attribution import attribute
from app.copilot.grounding import check_grounding
from app.copilot.summary import check_notes

PASSAGES = {
    1: "Heterogeneous jobs: each component may have its own resource request.",
    2: "Drain a node with scontrol update NodeName=n1 State=DRAIN Reason=maintenance.",
    3: "sacctmgr modify qos normal set MaxJobsPerUser=4 limits running jobs per user.",
}


def attributed(answer: str, question: str = "") -> dict[str, object]:
    items = check_grounding(answer, list(PASSAGES.values()), question, list(PASSAGES))
    return {item.text: item for item in attribute(answer, items)}


def test_a_sentence_citing_a_source_without_its_command_is_misattributed():
    items = attributed("[1] Limit them with `MaxJobsPerUser=4` in a QOS. Drain with `State=DRAIN` [2].")
    limit, drain = items["MaxJobsPerUser=4"], items["State=DRAIN"]
    assert (limit.holders, limit.cited, limit.misattributed) == ((3,), (1,), True)
    assert (drain.holders, drain.cited, drain.misattributed) == ((2,), (2,), False)


def test_a_fenced_block_answers_to_the_sentence_that_introduces_it():
    answer = "[1] Drain it first:\n\n```\nscontrol update NodeName=n1 State=DRAIN Reason=maintenance\n```\n"
    item = attributed(answer)["scontrol update NodeName=n1 State=DRAIN Reason=maintenance"]
    assert item.cited == (1,) and item.holders == (2,) and item.misattributed
    right = attributed(answer.replace("[1]", "[2]"))["scontrol update NodeName=n1 State=DRAIN Reason=maintenance"]
    assert not right.misattributed


def test_a_sentence_citing_several_sources_is_right_when_one_holds_it():
    assert not attributed("[1][3] Use `MaxJobsPerUser=4`.")["MaxJobsPerUser=4"].misattributed
    assert not attributed("[1] Jobs vary. Use `MaxJobsPerUser=4`.")["MaxJobsPerUser=4"].misattributed  # unmarked


def test_items_with_the_users_values_or_not_found_are_not_judged():
    answer = "[1] Run `scontrol update NodeName=c042 State=DRAIN Reason=maintenance` and `--frobnicate`."
    items = attributed(answer, "c042")
    adapted = items["scontrol update NodeName=c042 State=DRAIN Reason=maintenance"]
    assert adapted.found and adapted.adapted and not adapted.misattributed and adapted.holders == ()
    assert not items["--frobnicate"].found and not items["--frobnicate"].misattributed


def scripted_final(monkeypatch, answer: str, question: str, source: int) -> tuple[Final, int]:
    """The pipeline's Final when the model writes `answer` over the three PASSAGES, and the number the
    retriever gave PASSAGES[source]."""
    docs = [("hetero.md", PASSAGES[1]), ("drain.md", PASSAGES[2]), ("qos.md", PASSAGES[3])]
    options = CopilotOptions(answer=AnswerOptions(gate="off", passages=3))
    copilot = Copilot(loading.load_engine(ModelOptions()), options, FakeRetriever(docs))
    script_answer(copilot, monkeypatch, answer)
    final = collect(copilot.answer(question))
    return final, next(p.number for p in final.passages if p.text == PASSAGES[source])


def test_every_front_end_gets_a_note_naming_the_source_that_holds_it(tiny_engine, monkeypatch):
    question = "How do I stop one user running more than 4 jobs?"
    drain = "scontrol update NodeName=n1 State=DRAIN Reason=maintenance"
    answer = f"[1] Set `MaxJobsPerUser=4` on the QOS, drain with `{drain}`."
    final, number = scripted_final(monkeypatch, answer, question, source=3)
    assert final.recitations == []  # its commands are in two sources: no one source to cite instead
    assert "MaxJobsPerUser=4" in [item.text for item in final.misattributed]
    notes = check_notes(final, lambda text: f"`{text}`")
    assert ("note", f"`MaxJobsPerUser=4` is in [{number}], not in [1] that its sentence cites") in notes


def quotes_of(answer: str):
    from app.copilot.attribution import judge_quotes
    from app.copilot.events import Segment
    from app.copilot.quotes import mark_quotes

    return judge_quotes(mark_quotes([Segment(answer)], PASSAGES), PASSAGES)


def test_prose_quoted_from_one_source_under_a_sentence_citing_another_is_misquoted():
    answer = (
        "[1] Drain a node with scontrol update and a reason. "
        "[3] Each component may have its own resource request.\n"
        "[2] limits running jobs per user with a QOS [3]."
    )
    judged = {quote.text: quote for quote in quotes_of(answer)}
    drain, hetero, limit = (
        judged["Drain a node with scontrol update"],
        judged["Each component may have its own resource request."],  # the passage has "each": opening a sentence
        judged["limits running jobs per user"],
    )
    assert (drain.holders, drain.cited, drain.misattributed) == ((2,), (1,), True)
    assert (hetero.holders, hetero.cited, hetero.misattributed) == ((1,), (3,), True)
    assert (limit.holders, limit.cited, limit.misattributed) == ((3,), (2, 3), False)  # one of its markers holds it


def test_a_drafted_copy_that_begins_with_the_space_after_a_sentence_is_judged_by_that_sentence():
    from app.copilot.attribution import judge_quotes
    from app.copilot.events import Segment

    segments = [
        Segment("[2] Drain nodes first."),
        Segment(" Heterogeneous jobs: each component may have its own resource request", 1),  # the drafter's copy
        Segment(" [3]."),
    ]
    (quote,) = judge_quotes(segments, PASSAGES)
    assert (quote.text, quote.holders, quote.cited, quote.misattributed) == (
        "Heterogeneous jobs: each component may have its own resource request",
        (1,),
        (3,),
        True,
    )


def test_only_a_quotes_first_letter_may_differ_in_case_from_its_passage():
    (quote,) = quotes_of("[2] Each component may have its own resource request.")
    assert (quote.text, quote.holders) == ("Each component may have its own resource request.", (1,))
    (rest,) = quotes_of("[2] EACH component may have its own resource request.")  # more than its first letter
    assert rest.text == "component may have its own resource request."


def test_quotes_in_unmarked_sentences_short_runs_and_code_blocks_are_not_judged():
    answer = (
        "Drain a node with scontrol update first. [1] Use a reason.\n"  # the quote's sentence has no marker
        "[1] Heterogeneous jobs: each.\n"  # three words: chance, not a quote
        "[1] Run:\n```\nDrain a node with scontrol update NodeName=n1\n```\n"
    )
    assert quotes_of(answer) == []


def test_every_front_end_names_the_source_a_misquoted_sentence_came_from(tiny_engine, monkeypatch):
    from app.web.render import grounding_html

    answer = "[1] Drain a node with scontrol update, then set MaxJobsPerUser=4 limits running jobs per user."
    final, number = scripted_final(monkeypatch, answer, "How do I drain a node?", source=2)
    assert number != 1 and final.recitations == []
    quoted = [quote.text for quote in final.misquoted]  # from two sources: no one source to cite instead
    assert quoted == ["Drain a node with scontrol update", "set MaxJobsPerUser=4 limits running jobs per user."]
    note = f"“Drain a node with scontrol update” is quoted from [{number}], not from [1] that its sentence cites"
    assert ("note", note) in check_notes(final, lambda text: f"`{text}`")
    assert note in grounding_html(final.grounding, final.citations.invalid, final.misquoted)
    assert final.to_dict()["quotes"][0] == {
        "text": "Drain a node with scontrol update",
        "cited": (1,),
        "holders": (number,),
    }
