"""An answer that cites none of its passages, or writes the prompt's [n] placeholder as a value, is held back
while it streams and withheld, in every front end."""

import argparse

import pytest
from copilot_fakes import FakeRetriever, script_answer

from app.cli_options import add_answer_args, answer_options
from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, collect, loading
from app.copilot.abstention import abstains
from app.copilot.events import Passage, Token
from app.copilot.pipeline import final_from_text
from app.copilot.repeats import shown_answer
from app.copilot.summary import check_notes
from app.copilot.withhold import MARKER_AS_VALUE, PLACEHOLDER, UNCITED, WITHHELD, CitationGuard, quoted_source
from app.eval.questions import Question
from app.eval.runner import abstention_record
from app.web.session import Exchange

DOCS = [("drain.md", "Drain a node with scontrol update NodeName=n1 State=DRAIN."), ("other.md", "Unrelated text.")]


def feed_all(guard: CitationGuard, pieces: list[str]) -> str:
    return "".join(guard.feed(piece) for piece in pieces) + guard.flush()


def test_the_guard_holds_text_until_a_valid_marker_then_releases_all_of_it():
    guard = CitationGuard([1, 2])
    assert guard.feed("Use `scontrol` ") == "" and guard.feed("as in [") == "" and guard.feed("9] and [") == ""
    assert guard.feed("2") == ""  # a marker is whole only once it closes
    assert guard.feed("].") == "Use `scontrol` as in [9] and [2]."
    assert guard.feed(" More.") == " More." and guard.flush() == "" and not guard.notice


@pytest.mark.parametrize(
    "pieces",
    [
        ["Run `kubectl drain` on the node."],  # general knowledge, no marker
        ["See source [7]."],  # a marker naming no passage
    ],
)
def test_an_answer_that_ends_uncited_shows_nothing_and_gets_the_notice(pieces):
    guard = CitationGuard([1, 2, 3])
    assert feed_all(guard, pieces) == "" and guard.notice == UNCITED
    assert UNCITED.startswith(WITHHELD) and abstains(UNCITED)  # the notice reads as an abstention


def test_the_prompts_placeholder_in_prose_trips_the_guard_before_it_shows():
    guard = CitationGuard([1, 2, 3, 4, 5])
    pieces = ["[3] The meeting page [5] lists it. ", "The on-call administrator is [", "n], and the pager is [n]."]
    shown = feed_all(guard, pieces)
    assert shown == "[3] The meeting page [5] lists it. The on-call administrator is " and "[n" not in shown
    assert guard.notice == PLACEHOLDER and PLACEHOLDER.startswith(WITHHELD) and abstains(PLACEHOLDER)
    assert guard.feed(" More words.") == ""  # nothing after the trip


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # fresh8 s8-10: a right answer that ended "as described in the [n]" was withheld whole
        (
            "[1] Output goes to slurm-%j.out. Choose another name with `-o`, as described in the [n] page. More.",
            "[1] Output goes to slurm-%j.out. Choose another name with `-o`",
        ),
        ("[1] Use `-o`. See [n] for the rest.", "[1] Use `-o`."),
        ("[1] Use `-o` [2].\n\n[n] Then check it.", "[1] Use `-o` [2]."),
    ],
)
def test_the_placeholder_where_a_source_number_belongs_ends_the_answer_but_shows_what_came_before(text, shown):
    guard = CitationGuard([1, 2, 3])
    streamed = feed_all(guard, list(text))  # up to the placeholder: its leading words may have streamed
    assert guard.unnumbered and streamed.startswith(shown) and text.startswith(streamed) and "[n" not in streamed
    assert shown_answer(text, "unnumbered") == shown  # what the front ends show once it has ended
    assert not guard.notice and not guard.tripped  # shown, not withheld
    assert guard.feed(" More.") == ""


def test_the_placeholder_where_a_value_may_belong_or_before_any_citation_still_withholds():
    for text in ("[1] Contact [n] for help.", "[n] Use `-o`.", "[1] The admin is [n]."):
        guard = CitationGuard([1, 2])
        feed_all(guard, list(text))
        assert guard.notice == PLACEHOLDER and not guard.unnumbered, text


@pytest.mark.parametrize(
    "pieces",
    [
        ["[3] The on-call administrator tonight is [", "4], and their pager number is [5]."],
        ["[3] The default account is [2][4]", "."],
        ["[1] The limit is [2] ", "or less."],
        ["[1] The pager number is [5]"],  # the answer ends on it
    ],
)
def test_a_source_number_written_as_the_value_trips_the_guard_before_it_shows(pieces):
    guard = CitationGuard([1, 2, 3, 4, 5])
    shown = feed_all(guard, pieces)
    assert guard.notice == MARKER_AS_VALUE and guard.tripped and abstains(MARKER_AS_VALUE)
    assert shown == "".join(pieces).split(" is [")[0] + " is "  # held from the marker on: it never shows
    assert guard.feed(" More.") == ""


@pytest.mark.parametrize(
    "text",
    [
        "[1] The command is [2]:\n```\nscontrol update NodeName=n1 State=DRAIN\n```",  # the value follows
        "[1] This is described in [2], and the limit is 10 [3].",
        "[1] Drain it [2]. It is [3] a safe way to stop new jobs.",
        "[1] Set `x is [2].` in the config [3].",  # code, not prose
        "[2] Report it to the SSO: the address is `security@northgrid.example.org` [2].",  # the value is code
        "[1] The default chunk size is ``8MB`` [3], the largest is `5GB`.",  # rst's double backticks
    ],
)
def test_a_marker_that_cites_a_statement_after_is_is_shown(text):
    guard = CitationGuard([1, 2, 3])
    assert feed_all(guard, list(text)) == text and not guard.notice and not guard.tripped


def test_a_bracket_that_does_not_become_the_placeholder_is_shown_and_code_may_hold_it():
    guard = CitationGuard([1])
    text = "[1] Use `x=array[n]` and\n```\nfor [n] in list\n```\nthen node[n1-4] or [2]."
    assert feed_all(guard, list(text)) == text and not guard.notice


def test_with_no_passages_or_no_answer_nothing_is_held_or_withheld():
    free = CitationGuard([])
    assert feed_all(free, ["No sources ", "here."]) == "No sources here." and not free.notice
    empty = CitationGuard([1])
    assert feed_all(empty, ["", " "]) == "" and not empty.notice


GUIDE = (
    "Administration examples. To drain a node, specify a new state of DRAIN, DRAINED, or DRAINING. "
    "Slurm sets it to DRAINING or DRAINED. Return it to service later."
)


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ("To drain a node, specify a new state of DRAIN, DRAINED, or DRAINING. Return it to service later.", 2),
        ("To  drain a node, specify a new state of DRAIN. Slurm sets it to DRAINING or DRAINED.", 2),  # runs, whole
        ("To drain a node, specify a new state of DRAIN. Then reboot it with kubectl.", None),  # one sentence is not
        ("Run this:\n```\nscontrol update State=DRAIN\n```\nTo drain a node, specify a new state of DRAIN.", None),
        ("Return it to service.", None),  # three words whole, but not the source's sentence
        ("Later.", None),
    ],
)
def test_an_uncited_answer_quoting_one_passage_in_every_sentence_has_a_source(text, source):
    assert quoted_source(text, {1: "Unrelated text.", 2: GUIDE, 3: GUIDE}) == source  # the lowest that holds it


FRONTEND = (  # scontrol's page, as the chat's follow-up "how do I put it back into service?" read it (session 26)
    'Possible values are "DOWN", "DRAIN" or "RESUME". If you want to remove a front end node from service, you '
    'typically want to set its state to "DRAIN". "RESUME" is not an actual node state, but will return a "DRAINED", '
    '"DRAINING", or "DOWN" front end node to service.'
)


def test_a_sentence_that_only_ends_in_the_sources_words_does_not_quote_it():
    inverted = 'To put a node back into service, you typically want to set its state to "DRAIN".'  # 9 of 15 words
    quoted = '"RESUME" is not an actual node state, but will return a "DRAINED", "DRAINING", or "DOWN" node to service.'
    assert quoted_source(quoted, {1: FRONTEND}) == 1  # all but "node to service." in runs of six or more
    assert quoted_source(inverted, {1: FRONTEND}) is None
    assert quoted_source(f"{inverted} {quoted}", {1: FRONTEND}) is None  # so the answer stays withheld


def test_the_guard_shows_such_an_answer_at_the_end_opened_with_that_passages_marker():
    guard = CitationGuard([1, 2], {1: "Unrelated text.", 2: GUIDE})
    pieces = [
        "To drain a node, specify a new state ",
        "of DRAIN, DRAINED, or DRAINING.",
        " Return it to service later.",
    ]
    assert [guard.feed(piece) for piece in pieces] == ["", "", ""]  # held while it is uncited
    assert guard.flush() == "[2] " + "".join(pieces) and guard.added == 2 and not guard.notice


def test_its_final_shows_the_marker_and_says_the_citation_was_added_and_rescoring_agrees():
    answer = "To drain a node, specify a new state of DRAIN, DRAINED, or DRAINING. Return it to service later."
    passages = [Passage(1, "Unrelated text.", "other.md"), Passage(2, GUIDE, "guide.md", "Quick Start")]
    final = final_from_text("How do I drain a node?", passages, answer, "eos", UNCITED)  # as a saved run recorded it
    assert not final.withheld and final.shown == "[2] " + answer and final.citations.valid == [2]
    assert final.turn.answer == answer  # a follow-up goes on with the model's own text, which its KV cache holds
    notes = [text for _, text in check_notes(final, code=lambda text: f"`{text}`")]
    assert any(note.startswith("citation added: [2] (the model cited no source): “To drain a node") for note in notes)
    kept = final_from_text("How do I drain a node?", passages, "Run kubectl drain node1.", "eos", UNCITED)
    assert kept.withheld == UNCITED  # general knowledge stays withheld


def copilot_saying(tiny_engine, monkeypatch, answer: str, **options) -> Copilot:
    answer_options = AnswerOptions(gate="off", **options)
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(answer=answer_options), FakeRetriever(DOCS))
    script_answer(copilot, monkeypatch, answer)
    return copilot


@pytest.mark.withholds_uncited
def test_the_pipeline_streams_nothing_of_an_uncited_answer_and_hands_on_the_notice(tiny_engine, monkeypatch):
    copilot = copilot_saying(tiny_engine, monkeypatch, "Run kubectl drain node1 and wait for the pods to move.")
    events = list(copilot.answer("How do I drain a node?"))
    final = events[-1]
    assert "".join(e.text for e in events if isinstance(e, Token)) == ""
    assert final.withheld == UNCITED and final.shown == UNCITED and "kubectl" in final.answer  # kept, not shown
    assert final.turn.answer == UNCITED and final.turn.refused and final.turn.passages == ()  # nothing to build on
    follow_up = collect(copilot.answer("And how do I resume it?", [final.turn]))
    assert [p.number for p in follow_up.passages] == [1, 2]  # numbered afresh, not after the withheld turn's
    assert not any(source["cited"] for source in final.sources) and final.sources  # the sources are still listed
    question = Question("q", "How do I drain a node?", gold_sources=("drain.md",))
    assert abstention_record(final.shown, question)["abstained"]


@pytest.mark.withholds_uncited
def test_a_cited_answer_streams_whole_once_its_marker_closes(tiny_engine, monkeypatch):
    answer = "[1] Drain it with `scontrol update NodeName=n1 State=DRAIN`."
    events = list(copilot_saying(tiny_engine, monkeypatch, answer).answer("How do I drain a node?"))
    final, tokens = events[-1], [e.text for e in events if isinstance(e, Token)]
    assert "".join(tokens) == final.answer == answer and not final.withheld
    shown = [i for i, text in enumerate(tokens) if text]
    assert tokens[shown[0]].startswith("[1]") and shown[0] < 4  # held only while the opening marker formed


@pytest.mark.withholds_uncited
def test_the_pipeline_stops_at_the_placeholder(tiny_engine, monkeypatch):
    answer = "[1] Drain it first. The on-call administrator is [n], and their pager is [n]. " + "More. " * 20
    copilot = copilot_saying(tiny_engine, monkeypatch, answer)
    events = list(copilot.answer("Who is on call?"))
    final, shown = events[-1], "".join(e.text for e in events if isinstance(e, Token))
    assert shown.startswith("[1] Drain it first.") and "[n" not in shown
    assert final.withheld == PLACEHOLDER and final.finish_reason == "withheld" and final.turn.refused
    assert "More." not in final.answer  # generation stopped at the placeholder


@pytest.mark.withholds_uncited
def test_the_pipeline_stops_at_a_placeholder_citation_and_shows_the_answer_before_it(tiny_engine, monkeypatch):
    answer = "[1] Drain it with `scontrol update NodeName=n1 State=DRAIN`, as shown in [n]. " + "More. " * 20
    events = list(copilot_saying(tiny_engine, monkeypatch, answer).answer("How do I drain a node?"))
    final = events[-1]
    assert final.shown == "[1] Drain it with `scontrol update NodeName=n1 State=DRAIN`"
    assert not final.withheld and not final.turn.refused and final.finish_reason == "unnumbered"
    assert "More." not in final.answer  # generation stopped at the placeholder


@pytest.mark.withholds_uncited
def test_the_pipeline_stops_at_a_source_number_written_as_the_value(tiny_engine, monkeypatch):
    answer = "[1] The on-call administrator is [2], and their pager number is [1]. " + "More. " * 20
    events = list(copilot_saying(tiny_engine, monkeypatch, answer).answer("Who is on call?"))
    final, shown = events[-1], "".join(e.text for e in events if isinstance(e, Token))
    assert shown == "[1] The on-call administrator is "
    assert final.withheld == MARKER_AS_VALUE and final.shown == MARKER_AS_VALUE and final.finish_reason == "withheld"
    assert final.turn.refused and "More." not in final.answer


@pytest.mark.withholds_uncited
def test_the_option_off_shows_uncited_answers(tiny_engine, monkeypatch):
    answer = "Run kubectl drain node1."
    final = collect(copilot_saying(tiny_engine, monkeypatch, answer, withhold_uncited=False).answer("Drain?"))
    assert final.shown == answer and not final.withheld


def test_the_show_uncited_flag_turns_withholding_off():
    parser = argparse.ArgumentParser()
    add_answer_args(parser)
    assert answer_options(parser.parse_args([])).withhold_uncited
    assert not answer_options(parser.parse_args(["--show-uncited"])).withhold_uncited


@pytest.mark.withholds_uncited
def test_the_web_chat_warns_and_shows_the_notice(tiny_engine, monkeypatch):
    copilot = copilot_saying(tiny_engine, monkeypatch, "Run kubectl drain node1.")
    exchange = Exchange("How do I drain a node?")
    for event in copilot.answer(exchange.question):
        exchange.apply(event)
    contents = [m["content"] for m in exchange.messages()]
    warning, answer = contents[-1].split("\n\n", 1)  # the warning heads the answer's own message
    assert answer.startswith(UNCITED) and "kubectl" not in answer
    assert "withheld: the drafted answer cited none of its sources" in warning


@pytest.mark.withholds_uncited
def test_a_withheld_follow_up_lists_the_earlier_passages_its_notice_points_at(tiny_engine, monkeypatch):
    copilot = copilot_saying(tiny_engine, monkeypatch, "[1] Drain it with `scontrol update NodeName=n1 State=DRAIN`.")
    first = collect(copilot.answer("How do I drain a node?"))
    assert not first.withheld and [p.number for p in first.turn.passages] == [1, 2]
    script_answer(copilot, monkeypatch, "Run kubectl uncordon node1.")
    follow = collect(copilot.answer("And how do I undo it?", [first.turn]))
    assert follow.withheld == UNCITED and UNCITED.endswith("Check the sources listed below.")
    assert [p.number for p in follow.passages] == [1, 2]  # the search found only the first turn's passages
    assert [s["number"] for s in follow.sources] == [1, 2]  # so those are the ones listed below the notice
    assert not any(s["cited"] for s in follow.sources)
