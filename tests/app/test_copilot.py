"""The copilot pipeline on tiny models: event stream, conversation, budget, citations, engine sharing."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from copilot_fakes import Embedder, FakeRetriever

from app.copilot import (
    AnswerOptions,
    ContextBudgetError,
    Copilot,
    CopilotOptions,
    EmptyQuestionError,
    Final,
    ModelOptions,
    Passage,
    Status,
    Token,
    collect,
    loading,
)

RUNBOOK = [
    "To drain a node run scontrol update nodename=NODE state=drain reason=maintenance and wait.",
    "Check the reason afterwards with sinfo -R and resume with scontrol update nodename=NODE state=resume.",
    "Munge keys live in /etc/munge/munge.key and must be identical on every node.",
]


def runbook_retriever(texts):
    return FakeRetriever([(f"runbook-{i}.md", t) for i, t in enumerate(texts)], heading="Nodes")


@pytest.fixture
def copilot(tiny_engine):
    loaded = loading.load_engine(ModelOptions())
    return Copilot(loaded, CopilotOptions(answer=AnswerOptions(max_new_tokens=24)), runbook_retriever(RUNBOOK))


def test_stream_is_statuses_then_tokens_then_one_final(copilot):
    events = list(copilot.answer("How do I drain a node?"))
    stages = [e.stage for e in events if isinstance(e, Status)]
    assert stages == ["searching", "passages", "prefilling", "generating"]
    kinds = [type(e).__name__ for e in events]
    assert kinds[-1] == "Final" and kinds.count("Final") == 1
    assert kinds.index("Token") > kinds.index("Status") and "Token" in kinds
    final = events[-1]
    tokens = [e for e in events if isinstance(e, Token)]
    assert "".join(t.text for t in tokens) == final.answer
    assert [o for t in tokens for o in t.origins] == final.origins
    assert len(final.origins) == len(final.output_ids) == final.stats["new_tokens"]
    assert [p.number for p in final.passages] == [1, 2, 3]
    assert {s["path"] for s in final.sources} == {"runbook-0.md", "runbook-1.md", "runbook-2.md"}
    for key in ("decode_tokens_per_s", "tokens_per_pass", "copied_share", "acceptance_rate", "time_to_first_token_s"):
        assert key in final.stats


def test_speculative_answer_equals_plain_decoding(copilot):
    question = "How do I drain a node?"
    hybrid = collect(copilot.answer(question, options=AnswerOptions(max_new_tokens=40)))
    plain = collect(copilot.answer(question, options=AnswerOptions(max_new_tokens=40, speculation="none")))
    assert hybrid.output_ids == plain.output_ids and hybrid.prompt_ids == plain.prompt_ids
    assert set(plain.origins) == {"target"}


def test_on_a_path_that_verifies_no_drafts_answers_are_plain_and_labelled_so(copilot, monkeypatch):
    target = copilot.engine.target
    monkeypatch.setattr(type(target), "max_pass_rows", property(lambda self: 1))  # as llamacpp-f16's runner
    assert copilot.generation_config(AnswerOptions()).speculation == "none"  # not "hybrid": none can run
    answer = collect(copilot.answer("How do I drain a node?", options=AnswerOptions(max_new_tokens=24)))
    assert set(answer.origins) == {"target"} and answer.stats["tokens_per_pass"] == 1.0


def test_a_named_draft_that_the_path_cannot_use_is_reported_not_dropped_in_silence(tiny_engine, monkeypatch, capsys):
    named = ModelOptions(draft="/models/my-draft.gguf")
    with monkeypatch.context() as path:
        runner = type(loading.load_engine(named).engine.target)
        path.setattr(runner, "max_pass_rows", property(lambda self: 1))  # as llamacpp-f16's runner
        Copilot.load(CopilotOptions(models=named))
        said = capsys.readouterr().err
        assert "--draft /models/my-draft.gguf is not used" in said and "--quant llamacpp" in said
        for models in (ModelOptions(), ModelOptions(draft="none")):  # the default draft, or none asked for
            Copilot.load(CopilotOptions(models=models))
            assert capsys.readouterr().err == ""
    Copilot.load(CopilotOptions(models=named))  # a path that verifies drafts uses the named one
    assert capsys.readouterr().err == ""


def test_follow_up_uses_history_in_retrieval_prompt_and_numbering(copilot):
    first = collect(copilot.answer("How do I drain a node?"))
    retriever = copilot.retriever()
    follow = collect(copilot.answer("and how do I undo it?", history=[first.turn]))
    assert retriever.queries[-1] == "and how do I undo it?\nHow do I drain a node?"
    decoded = copilot.engine.tokenizer.decode(follow.prompt_ids)
    assert first.answer.strip() in decoded and "How do I drain a node?" in decoded
    # the first prompt is a prefix of the follow-up's: its KV cache is reused
    assert follow.prompt_ids[: len(first.prompt_ids)] == first.prompt_ids
    # the same chunks are not repeated: they stay citable under their first numbers
    assert [p.number for p in follow.passages] == [1, 2, 3] and follow.turn.passages == ()


def test_new_passages_are_numbered_after_the_history(tiny_engine):
    loaded = loading.load_engine(ModelOptions())
    copilot = Copilot(
        loaded, CopilotOptions(answer=AnswerOptions(max_new_tokens=8, passages=2)), runbook_retriever(RUNBOOK)
    )
    first = collect(copilot.answer("drain?"))
    # the same chunks, ranked the other way round
    copilot._retriever = FakeRetriever([(f"runbook-{i}.md", t) for i, t in enumerate(RUNBOOK)][::-1], heading="Nodes")
    follow = collect(copilot.answer("munge?", history=[first.turn]))
    assert [(p.number, p.text) for p in follow.turn.passages] == [(3, RUNBOOK[2])]


class UndoRetriever(FakeRetriever):
    """Ranks the chunks in order, but the last one first for a question on undoing searched alone."""

    def retrieve(self, query, k):
        hits = super().retrieve(query, len(self.docs))
        return (hits if "\n" in query or "undo" not in query else [hits[-1], *hits[:-1]])[:k]


def test_a_follow_up_whose_search_finds_the_earlier_passages_again_reads_the_next_ones(tiny_engine):
    texts = [*RUNBOOK, "Reboot a drained node with scontrol reboot ASAP nextstate=RESUME.", "Logs: /var/log/slurmd.log"]
    options = CopilotOptions(answer=AnswerOptions(max_new_tokens=8, passages=2))
    retriever = UndoRetriever([(f"runbook-{i}.md", t) for i, t in enumerate(texts)])
    copilot = Copilot(loading.load_engine(ModelOptions()), options, retriever)
    first = collect(copilot.answer("How do I drain a node?"))
    assert [p.text for p in first.turn.passages] == texts[:2]
    follow = collect(copilot.answer("and how do I undo it?", history=[first.turn]))
    # searched with the previous question it finds texts 0 and 1 again, which the prompt holds: their places go
    # to the next passages of that search, not to the question searched alone (text 4 first)
    assert retriever.queries[-1] == "and how do I undo it?\nHow do I drain a node?"
    assert [(p.number, p.text) for p in follow.turn.passages] == [(3, texts[2]), (4, texts[3])]
    decoded = copilot.engine.tokenizer.decode(follow.prompt_ids)
    assert texts[3] in decoded and texts[4] not in decoded  # at most the turn's number of passages
    # a question searched alone keeps the earlier turns bare: its own first passages, and nothing further
    searches = len(retriever.queries)
    alone = collect(copilot.answer("Where do the munge keys live?", history=[first.turn, follow.turn]))
    assert [p.text for p in alone.turn.passages] == texts[:2] and len(retriever.queries) == searches + 1


def test_the_places_of_passages_found_again_go_to_each_further_ranking_in_turn():
    from app.copilot.conversation import number_new_passages

    def passages(*ids):
        return [Passage(1, f"text {i}", "a.md", chunk_id=i) for i in ids]

    held = [Passage(n, f"text {i}", "a.md", chunk_id=i) for n, i in enumerate("ab", 1)]
    further = (passages("a", "b", "c", "d", "e"), passages("a", "f", "d", "g"))
    new = number_new_passages(passages("a", "b"), held, 4, further)
    assert [(p.number, p.chunk_id) for p in new] == [(3, "c"), (4, "f"), (5, "d"), (6, "e")]
    assert [p.chunk_id for p in number_new_passages(passages("b", "h"), held, 2, further)] == ["h", "c"]
    assert [p.chunk_id for p in number_new_passages(passages("h", "c"), held, None)] == ["h", "c"]


def test_a_follow_up_passage_joined_from_chunks_the_prompt_holds_is_not_repeated():
    from app.copilot import Passage
    from app.copilot.conversation import number_new_passages

    already = [Passage(1, "entry head", "scontrol.html", chunk_id="c1"), Passage(2, "tail", "x", chunk_id="c2")]
    joined = Passage(1, "entry head and tail", "scontrol.html", chunk_id="c1+c2")  # retrieval/neighbours.py
    grown = Passage(2, "entry head and more", "scontrol.html", chunk_id="c1+c3")
    assert [(p.number, p.chunk_id) for p in number_new_passages([joined, grown], already)] == [(3, "c1+c3")]


def test_history_keeps_recent_turns_whole_then_bare_then_drops_the_oldest():
    from app.copilot import Passage, Turn
    from app.copilot.conversation import keep_history
    from app.copilot.prompting import turn_messages

    def count(messages):
        return sum(len(m["content"]) for m in messages)

    passage = Passage(1, "p" * 100, "a.md")
    turns = [Turn(f"q{i}", "a" * 20, (passage,)) for i in range(4)]
    bare = count(turn_messages(turns[0], with_passages=False))
    whole = count(turn_messages(turns[0], with_passages=True))
    kept = keep_history(turns, whole + 2 * bare, count)
    assert kept.turns == 3 and kept.passages == [passage]  # newest whole, two bare, the oldest dropped
    assert [m["content"] for m in kept.messages if m["role"] == "user"][-1].startswith("Sources:")
    assert kept.answers == ["a" * 20] * 3
    assert keep_history(turns, 0, count).messages == []


def test_history_keeps_only_turns_whose_passages_are_numbered_below_the_newer_ones_whole():
    from app.copilot import Passage, Turn
    from app.copilot.conversation import keep_history

    def count(messages):
        return sum(len(m["content"]) for m in messages)

    def turn(question, *numbers):
        return Turn(question, "answer", tuple(Passage(n, f"{question} passage {n}", "a.md") for n in numbers))

    # a refused turn has no passages; the one after it was searched alone and numbered its sources from [1]
    turns = [turn("q0", 1, 2), turn("q1", 3), turn("q2"), turn("q3", 1, 2), turn("q4", 3, 4)]
    kept = keep_history(turns, 10_000, count)
    assert [p.number for p in kept.passages] == [1, 2, 3, 4] and kept.turns == 5
    assert [p.text for p in kept.passages][:2] == ["q3 passage 1", "q3 passage 2"]
    assert "q0 passage" not in str(kept.messages) and "q1 passage" not in str(kept.messages)


def test_passages_are_trimmed_to_the_context_and_a_huge_question_is_refused(copilot):
    long_passages = [t * 30 for t in RUNBOOK]  # ~8k tokens with the byte tokenizer: over the 4096 context
    copilot._retriever = runbook_retriever(long_passages)
    events = list(copilot.answer("drain?", options=AnswerOptions(max_new_tokens=8)))
    passages_status = next(e for e in events if isinstance(e, Status) and e.stage == "passages")
    assert passages_status.detail["trimmed_passages"] >= 1
    assert len(events[-1].prompt_ids) + 8 <= copilot.engine.context_limit
    with pytest.raises(ContextBudgetError, match="shorten the question"):
        list(copilot.answer("why? " * 1000))


def test_empty_question_is_a_clear_error(copilot):
    with pytest.raises(EmptyQuestionError, match="empty"):
        list(copilot.answer("   "))


def test_stopping_a_stream_frees_the_engine_for_the_next_answer(copilot):
    stream = copilot.answer("How do I drain a node?", options=AnswerOptions(max_new_tokens=200))
    for event in stream:
        if isinstance(event, Token):
            break
    assert copilot.busy
    stream.close()
    assert not copilot.busy
    final = collect(copilot.answer("How do I drain a node?"))
    assert final.stats["new_tokens"] > 0


def test_concurrent_answers_never_share_engine_state(copilot):
    questions = ["How do I drain a node?", "Where do munge keys live?", "How do I resume a node?"]
    expected = {q: collect(copilot.answer(q)).output_ids for q in questions}
    results: dict[str, list[int]] = {}

    def ask(question):
        results[question] = collect(copilot.answer(question)).output_ids

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == expected


def test_final_lists_citations_grounding_and_provenance(copilot):
    final = collect(copilot.answer("How do I drain a node?"))
    assert isinstance(final, Final)
    assert "".join(s.text for s in final.citations.segments) == final.answer
    copied = {s.passage for s in final.citations.segments if s.passage is not None}
    assert copied == set(final.citations.copied)
    record = final.to_dict()
    assert record["answer"] == final.answer and "turn" not in record and "valid" in record["citations"]


def scripted_answer(copilot, monkeypatch, text):
    """Make the engine 'generate' `text` in one event (the tiny random model cannot be made to say something)."""
    from generation.drafters.base import Origin
    from generation.engine import Event
    from generation.stats import Stats

    ids = copilot.engine.tokenizer(text, add_special_tokens=False)["input_ids"]

    def generate(prompt_ids, chunks, config, token_filter=None):
        yield Event(text, ids, [Origin("target")] * len(ids), Stats(new_tokens=len(ids)), "eos")

    monkeypatch.setattr(copilot.engine, "generate", generate)


def test_final_grounding_flags_invented_names_and_numbers_but_not_the_questions_own(copilot, monkeypatch):
    scripted_answer(copilot, monkeypatch, "Drain it for 2 hours [1], then page John Smith at 555-0134.")
    final = collect(copilot.answer("How do I drain a node for 2 hours?"))
    flagged = {(item.text, item.kind) for item in final.ungrounded}
    assert flagged == {("John Smith", "name"), ("555-0134", "phone")}
    assert ("2 hours", "quantity", True) in {(i.text, i.kind, i.found) for i in final.grounding}


def test_a_follow_up_answer_may_use_the_values_an_earlier_question_gave(copilot, monkeypatch):
    from generation.engine import Event
    from generation.stats import Stats

    answer = "Resume it with `scontrol update nodename=c042 state=resume` [2], after the 2 hours."
    scripted_answer(copilot, monkeypatch, answer)
    first = collect(copilot.answer("How do I drain node c042 for 2 hours?"))
    filters = []
    ids = copilot.engine.tokenizer(answer, add_special_tokens=False)["input_ids"]

    def generate(prompt_ids, chunks, config, token_filter=None):
        filters.append(token_filter)
        yield Event(answer, ids, [], Stats(new_tokens=len(ids)), "eos")

    monkeypatch.setattr(copilot.engine, "generate", generate)
    final = collect(copilot.answer("And once it is fixed, how do I put it back?", history=[first.turn]))
    items = {(item.text, item.kind): item for item in final.grounding}
    # built from [2]'s `scontrol update nodename=NODE state=resume` with the node the first question named
    assert items["scontrol update nodename=c042 state=resume", "code"].found and final.ungrounded == []
    assert items["2 hours", "quantity"].found  # the user's own, said a turn before
    assert filters[0].sources.holds_whole("code", "scontrol update nodename=c042 state=resume")  # steered alike


def test_final_grounding_reads_the_passage_title_and_heading_the_model_was_shown(tiny_engine, monkeypatch):
    retriever = FakeRetriever([("sdiag.html", "Shows scheduler statistics.")], title="sdiag", heading="DESCRIPTION")
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(), retriever)
    scripted_answer(copilot, monkeypatch, "Run `sdiag` [1], or `sdiag --stats` [1].")
    final = collect(copilot.answer("How do I see scheduler statistics?"))
    code = {(i.text, i.found) for i in final.grounding if i.kind == "code"}
    assert code == {("sdiag", True), ("sdiag --stats", False)}


@pytest.fixture
def calibrated(monkeypatch):
    from app.copilot import gate

    monkeypatch.setitem(gate.THRESHOLDS, "fake-model", 0.5)


def test_gate_refuses_off_topic_questions_without_running_the_model(copilot, calibrated):
    copilot._retriever.similarity = 0.3
    events = list(copilot.answer("How do I restart a kubernetes pod?"))
    final = events[-1]
    assert final.gated and final.finish_reason == "gated" and final.output_ids == []
    assert "do not cover" in final.answer and "runbook-0.md" in final.answer  # the nearest sources are named
    assert not any(isinstance(e, Status) and e.stage == "prefilling" for e in events)
    assert final.relevance == {
        "similarity": 0.3,
        "threshold": 0.5,
        "calibrated": True,
        "judged": None,
        "judge_threshold": None,
        "veto": None,
        "banded": False,
        "covered": False,
    }
    # the nearest sources are listed, not cited: no source is marked as the answer's
    assert not any(source["cited"] for source in final.sources) and final.citations.markers == []
    from app.web.session import Exchange

    view = Exchange("How do I restart a kubernetes pod?")
    for event in events:
        view.apply(event)
    assert view.title == "the sources do not cover this question: not answered" and not view.pending


def test_a_follow_up_refused_over_the_passages_of_the_turn_before_lists_them_under_their_numbers(copilot, calibrated):
    first = collect(copilot.answer("How do I drain a node?"))
    assert not first.gated and first.turn.passages
    copilot._retriever.similarity = 0.3  # the same passages found again, now under the gate's threshold
    final = collect(copilot.answer("How do I take it out of production while I look?", history=[first.turn]))
    assert final.gated and "The nearest sources I found are:" in final.answer  # not a bare "do not cover"
    numbers = [source["number"] for source in final.sources]
    assert numbers and set(numbers) <= {p.number for p in first.turn.passages}  # as the conversation numbered them
    assert "runbook-0.md" in final.answer


def test_a_refused_follow_up_lists_what_its_search_ranked_first_not_the_passages_further_down(tiny_engine, calibrated):
    texts = [*RUNBOOK, "Reboot a drained node with scontrol reboot ASAP nextstate=RESUME.", "Logs: /var/log/slurmd.log"]
    options = CopilotOptions(answer=AnswerOptions(max_new_tokens=8, passages=2))
    retriever = runbook_retriever(texts)
    copilot = Copilot(loading.load_engine(ModelOptions()), options, retriever)
    first = collect(copilot.answer("How do I drain a node?"))
    retriever.similarity = 0.3  # found again below the gate's threshold; the prompt would read texts 2 and 3 too
    final = collect(copilot.answer("How do I take it out of production while I look?", history=[first.turn]))
    assert final.gated and [source["number"] for source in final.sources] == [1, 2]
    assert "runbook-0.md" in final.answer and "runbook-2.md" not in final.answer


def test_a_refusal_still_shows_where_the_questions_value_falls_in_a_listed_sources_thresholds(
    tiny_engine, calibrated, monkeypatch
):
    from app.copilot import gate

    ups = "| Signal | WARNING | CRITICAL |\n| --- | --- | --- |\n| UPS runtime left | < 15 min | < 10 min: shut down |"
    retriever = FakeRetriever([("power.md", ups)], title="Power and Cooling Incident", heading="Thresholds")
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(), retriever)
    retriever.similarity = 0.3
    # the band passes the low cosine (gate.py); a refusal then comes from the judge's veto
    copilot.loaded.target = "tiny"
    monkeypatch.setitem(gate.JUDGE_THRESHOLDS, "tiny", 1e9)
    monkeypatch.setitem(gate.JUDGE_VETOES, "tiny", 1e9)  # the model never says yes so surely
    final = collect(copilot.answer("UPS runtime left shows 12 minutes, what do I do?"))
    assert final.relevance["banded"] and final.relevance["judged"] < final.relevance["veto"]
    assert final.gated and [(d.value, d.text) for d in final.definitions] == [
        ("12 minutes", "UPS runtime left: WARNING < 15 min")
    ]
    from app.copilot.summary import check_notes
    from app.web import render as web_render

    assert "UPS runtime left: WARNING &lt; 15 min" in web_render.details_html(final)
    assert any("UPS runtime left: WARNING < 15 min" in text for _, text in check_notes(final, code=str))


def test_every_front_end_shows_the_warn_modes_warning_with_the_answer(copilot, calibrated, capsys):
    from app import ask
    from app.slack import render as slack_render
    from app.web import render as web_render

    copilot._retriever.similarity = 0.3
    final = collect(copilot.answer("drain?", options=AnswerOptions(max_new_tokens=4, gate="warn")))
    warning = "the sources may not cover this question (the closest source matches the question at 0.30"
    ask.print_summary(final)
    assert f"  warning: {warning}" in capsys.readouterr().err
    assert f":warning: {warning}" in slack_render.footer(final)
    assert "⚠ The sources may not cover this question" in web_render.details_html(final)
    copilot._retriever.similarity = 0.9  # covered: no warning anywhere
    final = collect(copilot.answer("drain?", options=AnswerOptions(max_new_tokens=4, gate="warn")))
    ask.print_summary(final)
    assert "may not cover" not in capsys.readouterr().err + slack_render.footer(final) + web_render.details_html(final)


def test_every_front_end_shows_a_gated_refusal_with_its_reason_not_zero_speed(copilot, calibrated, capsys):
    from app import ask
    from app.slack import render as slack_render
    from app.web import render as web_render

    copilot._retriever.similarity = 0.3
    final = collect(copilot.answer("How do I restart a kubernetes pod?"))
    why = "not answered: the closest source matches the question at 0.30, below the relevance gate's 0.50"
    ask.print_summary(final)  # specrag ask: this raised KeyError on the missing decode stats
    printed = capsys.readouterr().err
    assert printed.startswith(f"[{why}]\nSources:") and printed.rstrip().endswith("ask again with --gate warn")
    record = json.loads(json.dumps(ask.answer_record(final)))  # specrag ask --json
    assert record["gated"] is True and record["speculation"] is None and record["output_token_ids"] == []
    assert f"_{why}_" in slack_render.footer(final)
    html = web_render.details_html(final)
    assert why.replace("'", "&#x27;") in html and "runbook-0.md" in html
    assert "Provenance" not in html and "tok/s" not in html


def test_gate_warn_answers_and_off_skips_the_check(copilot, calibrated):
    copilot._retriever.similarity = 0.3
    events = list(copilot.answer("drain?", options=AnswerOptions(max_new_tokens=4, gate="warn")))
    warned = events[-1]
    assert not warned.gated and warned.stats["new_tokens"] == 4 and warned.relevance["covered"] is False
    warning = "the sources may not cover this question (the closest source matches the question at 0.30, below"
    assert any(isinstance(e, Status) and e.stage == "passages" and warning in e.message for e in events)
    off = collect(copilot.answer("drain?", options=AnswerOptions(max_new_tokens=4, gate="off")))
    assert off.relevance is None and not off.gated


def test_gate_passes_relevant_questions_and_never_judges_uncalibrated_models(copilot, calibrated):
    assert not collect(copilot.answer("How do I drain a node?")).gated
    copilot._retriever.similarity = 0.1
    copilot._retriever.embedder = Embedder("another-model")
    final = collect(copilot.answer("How do I drain a node?"))
    assert not final.gated and final.relevance["calibrated"] is False
    given = [Passage(1, "unrelated text", "x.md")]
    assert not collect(copilot.answer("anything?", passages=given)).gated


@pytest.fixture
def judged(copilot, calibrated, monkeypatch):
    """The tiny target gets a judge; returns a setter for its threshold."""
    from app.copilot import gate

    copilot.loaded.target = "tiny"
    copilot._retriever.similarity = 0.3  # below the gate's 0.5: the judge decides

    def set_threshold(value):
        monkeypatch.setitem(gate.JUDGE_THRESHOLDS, "tiny", value)

    set_threshold(-1e9)
    return set_threshold


def stages(events):
    return [e.stage for e in events if isinstance(e, Status)]


def test_judge_lets_a_weak_match_through_when_the_model_finds_the_answer(copilot, judged):
    from app.copilot.prompting import JUDGE_QUESTION, build_messages, encode_prompt
    from generation.token_ids import common_prefix_length

    events = list(copilot.answer("How do I drain a node?"))
    final = events[-1]
    assert stages(events) == ["searching", "passages", "checking", "prefilling", "generating"]
    assert not final.gated and final.stats["new_tokens"] > 0
    assert final.relevance["covered"] is True and isinstance(final.relevance["judged"], float)

    # the answer's prefill took the judge prompt's KV up to the closing line: only that line was computed
    def prompt(closing):
        return encode_prompt(copilot.engine.tokenizer, build_messages(final.question, final.passages, (), closing))

    up_to_closing = common_prefix_length(final.prompt_ids, prompt(""))
    assert copilot.engine.target.reused == common_prefix_length(prompt(JUDGE_QUESTION), final.prompt_ids[:-1])
    assert copilot.engine.target.reused >= up_to_closing > 0.9 * len(final.prompt_ids)


def test_judge_verdict_is_the_log_odds_against_its_threshold(copilot, judged):
    from app.copilot import gate

    score = collect(copilot.answer("How do I drain a node?")).relevance["judged"]
    judged(score - 0.01)
    assert not collect(copilot.answer("How do I drain a node?")).gated
    judged(score + 0.01)
    events = list(copilot.answer("How do I drain a node?"))
    final = events[-1]
    assert final.gated and final.output_ids == [] and "prefilling" not in stages(events)
    assert final.relevance["judged"] == score and final.relevance["covered"] is False
    assert "judge_s" in final.stats
    why = gate.why_refused(final.relevance)
    assert "below the relevance gate's 0.50, and asked, the model did not find the answer in them" in why
    assert f"(log-odds {score:.2f}, below {score + 0.01:.2f})" in why


def test_judge_is_asked_only_below_the_threshold_and_warn_keeps_its_verdict(copilot, judged):
    copilot._retriever.similarity = 0.9
    events = list(copilot.answer("How do I drain a node?"))
    assert "checking" not in stages(events) and events[-1].relevance["judged"] is None
    copilot._retriever.similarity = 0.3
    judged(1e9)  # the model never says yes so surely
    events = list(copilot.answer("drain?", options=AnswerOptions(max_new_tokens=4, gate="warn")))
    assert not events[-1].gated and events[-1].stats["new_tokens"] == 4
    checking = [e.message for e in events if isinstance(e, Status) and e.stage == "checking"]
    assert "the model did not find the answer in them" in checking[-1]
    off = list(copilot.answer("drain?", options=AnswerOptions(max_new_tokens=4, gate="off")))
    assert "checking" not in stages(off) and off[-1].relevance is None


def test_a_veto_judges_questions_above_the_threshold_and_refuses_when_the_model_says_no(copilot, judged, monkeypatch):
    from app.copilot import gate

    copilot._retriever.similarity = 0.9  # cosine lets it through
    monkeypatch.setitem(gate.JUDGE_VETOES, "tiny", -1e9)
    events = list(copilot.answer("How do I drain a node?"))
    final = events[-1]
    assert stages(events) == ["searching", "passages", "checking", "prefilling", "generating"]
    assert not final.gated and final.stats["new_tokens"] > 0 and isinstance(final.relevance["judged"], float)
    checking = [e.message for e in events if isinstance(e, Status) and e.stage == "checking"]
    assert checking == ["asking the model whether the sources answer the question…"]  # not a "weak match"
    score = final.relevance["judged"]
    monkeypatch.setitem(gate.JUDGE_VETOES, "tiny", score + 0.01)
    events = list(copilot.answer("How do I drain a node?"))
    final = events[-1]
    assert final.gated and final.output_ids == [] and "prefilling" not in stages(events)
    assert final.relevance["covered"] is False and final.relevance["veto"] == score + 0.01
    why = gate.why_refused(final.relevance)
    assert "at 0.90, above the relevance gate's 0.50, but asked, the model did not find the answer in them" in why
    assert f"(log-odds {score:.2f}, below {score + 0.01:.2f})" in why


def test_a_value_in_a_sources_thresholds_passes_a_low_cosine_and_the_refusal_says_why_not(copilot, judged):
    """Seen in the chat (session 58): "inlet temperature is 31C" was refused at cosine 0.41 over the table that gives
    its WARNING row."""
    from app.copilot import gate

    table = (
        "| Signal | WARNING | CRITICAL |\n| --- | --- | --- |\n"
        "| Inlet temperature (rack front) | **27 °C** | **32 °C**: start emergency shutdown of hall B |\n"
    )
    copilot._retriever = FakeRetriever([("cooling.md", table)], heading="Thresholds")
    copilot._retriever.similarity = 0.3  # below the gate's 0.5
    judged(1e9)  # and the judge never lets a weak match through
    assert collect(copilot.answer("the disk is full, what do I do?")).gated  # no value of the question's in it
    final = collect(copilot.answer("the hall B inlet temperature is 31C, what do I do?"))
    assert not final.gated and final.relevance["banded"] is True and final.stats["new_tokens"] > 0
    reading = {**final.relevance, "judged": -1.0, "veto": 0.0}  # were the model to say No, the veto's bar applies
    assert "below the relevance gate's 0.50; a source gives the band your value falls in, but asked" in (
        gate.why_refused(reading)
    )
    assert "(log-odds -1.00, below 0.00)" in gate.why_refused(reading)


def test_a_question_that_asks_yes_or_no_is_never_vetoed(copilot, judged, monkeypatch):
    from app.copilot import gate

    copilot._retriever.similarity = 0.9
    monkeypatch.setitem(gate.JUDGE_VETOES, "tiny", 1e9)  # the model never says yes so surely: every wh-question vetoed
    assert collect(copilot.answer("Which command drains a node?")).gated
    events = list(copilot.answer("can i just drain the node?"))  # the judge would answer the question's own No
    assert not events[-1].gated and "checking" not in stages(events) and events[-1].relevance["veto"] is None


def test_yes_or_no_questions_are_told_by_the_clause_that_asks():
    from app.copilot.gate import asks_yes_or_no

    assert asks_yes_or_no("Asked a user for job ids two weeks ago and never heard back. Am I allowed to close it?")
    assert asks_yes_or_no("a colleague says just delete that CA's .r0 file and be done - ok to do that?")
    assert asks_yes_or_no("Is there a way to check the memory of a running step?")
    assert not asks_yes_or_no("Who is the on-call administrator tonight, and what is their pager number?")
    assert not asks_yes_or_no("Can Slurm power idle nodes down, and how long are they idle before that happens?")
    assert not asks_yes_or_no("what's the fairshare half-life? a user wants to know how long it drags them down")
    assert not asks_yes_or_no("How do I drain a node?") and not asks_yes_or_no("")


def test_judge_needs_a_tokenizer_that_tells_yes_from_no():
    from app.copilot import gate

    class Tokenizer:
        def __init__(self, ids):
            self.ids = ids

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": self.ids[text]}

    assert gate.judge_tokens(Tokenizer({"Yes": [7, 1], "No": [9]})) == (7, 9)
    assert gate.judge_tokens(Tokenizer({"Yes": [7], "No": [7, 2]})) is None
    assert gate.judge_tokens(Tokenizer({"Yes": [], "No": [9]})) is None


def test_gate_also_judges_retrieved_passages_handed_in_by_the_caller(copilot, calibrated):
    copilot._retriever.similarity = 0.3
    retrieved = copilot.retrieve("How do I restart a kubernetes pod?", 3)  # as specrag eval does
    assert collect(copilot.answer("How do I restart a kubernetes pod?", passages=retrieved)).gated


def test_a_serving_copilot_sees_a_new_ingest_without_restarting(tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1] / "retrieval"))
    from retrieval_fakes import FakeEmbedder

    from retrieval.ingest import ingest
    from retrieval.live import LiveRetriever

    docs, index, fake = tmp_path / "docs", tmp_path / "index", FakeEmbedder()
    docs.mkdir()
    (docs / "drain.md").write_text("# Drain\n\nDrain a node with scontrol update state=drain.\n")
    ingest([docs], index, embedder=fake)
    copilot = Copilot.retrieval_only(CopilotOptions(index_dir=index), LiveRetriever(index, embedder=fake))
    assert {p.source for p in copilot.retrieve("zebra firmware", 5)} == {str(docs / "drain.md")}
    (docs / "zebra.md").write_text("# Zebra\n\nZebra firmware updates need a reboot of the zebra controller.\n")
    ingest([docs], index, embedder=fake)
    assert copilot.retrieve("zebra firmware", 1)[0].source == str(docs / "zebra.md")


def test_the_heap_is_trimmed_once_per_answer_also_when_the_stream_is_closed_early(copilot, monkeypatch):
    calls = []
    monkeypatch.setattr("app.copilot.pipeline.release_free_memory", lambda: calls.append(1))
    list(copilot.answer("How do I drain a node?"))
    assert calls == [1]
    stream = copilot.answer("How do I drain a node?")
    next(e for e in stream if isinstance(e, Token))
    stream.close()  # a stopped answer (web stop button, client gone)
    assert calls == [1, 1] and not copilot.busy


def test_a_warmed_up_copilot_prefills_only_the_question_and_answers_the_same(tiny_engine):
    """warm_up (the chat and Slack call it at start) prefills the system prompt once; the first
    answer then prefills only its own tokens. A copilot that did not warm up (`specrag ask`, the eval)
    warms on its first answer, so it computes the prompt in the same two pieces and answers the same."""
    from app.copilot.prompting import shared_prompt_ids

    def fresh():  # a new engine per load (tiny fixture): nothing cached yet
        loaded = loading.load_engine(ModelOptions())
        return Copilot(loaded, CopilotOptions(answer=AnswerOptions(max_new_tokens=24)), runbook_retriever(RUNBOOK))

    cold_copilot = fresh()
    cold = collect(cold_copilot.answer("How do I drain a node?"))
    warmed = fresh()
    warmed.warm_up()
    shared = shared_prompt_ids(warmed.engine.tokenizer)
    assert len(shared) > 20 and warmed.engine.target.length == len(shared)
    warm = collect(warmed.answer("How do I drain a node?"))
    assert warm.output_ids == cold.output_ids
    assert warm.stats["prefilled_tokens"] == len(cold.prompt_ids) - 1 - len(shared)
    assert cold.stats["prefilled_tokens"] == len(cold.prompt_ids) - 1  # its warm-up counts: it computed all
    again = collect(cold_copilot.answer("How do I drain a node?"))  # warmed once per copilot, not per answer
    assert again.stats["prefilled_tokens"] == 0 and again.output_ids == cold.output_ids


def test_a_one_shot_copilot_on_llama_cpp_loads_the_prefix_the_first_one_saved(tiny_models, monkeypatch, tmp_path):
    """Each `specrag ask` is a new process: the first saves the shared prefix's KV cache under the cache
    root, the next loads it instead of prefilling it, and both answer token for token the same."""
    from tiny_gguf import write_tiny_gguf

    from app.copilot.prompting import shared_prompt_ids
    from generation.engine import Engine
    from generation.llamacpp_lm import LlamaCppLM

    gguf = write_tiny_gguf(tmp_path / "target.gguf")
    tokenizer = tiny_models[2]
    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path / "home"))
    answers = []
    for run in range(2):
        runner = LlamaCppLM(gguf, n_ctx=2048, row_invariant=False)
        prefilled = []
        prefill = runner.prefill
        runner.prefill = lambda ids, prefill=prefill, seen=prefilled: (seen.append(len(ids)), prefill(ids))[1]
        loaded = loading.LoadedEngine(Engine(runner, tokenizer), "/models/tiny.gguf", None)
        copilot = Copilot(loaded, CopilotOptions(answer=AnswerOptions(max_new_tokens=24)), runbook_retriever(RUNBOOK))
        answers.append(collect(copilot.answer("How do I drain a node?")))
        shared = len(shared_prompt_ids(tokenizer))
        if run == 0:
            assert prefilled[0] == shared and len(list((tmp_path / "home" / "prefix-kv").glob("*.kv"))) == 1
        else:
            assert shared not in prefilled  # loaded, not computed
        assert answers[-1].stats["prefilled_tokens"] == len(answers[-1].prompt_ids) - 1 - (shared if run else 0)
    assert answers[0].output_ids == answers[1].output_ids and len(answers[0].output_ids) >= 10


def test_a_question_is_computed_in_the_same_pieces_whatever_was_asked_before(tiny_models, monkeypatch, tmp_path):
    """On llamacpp-f16 logits depend on how a prompt is split into passes: a question's prompt reuses only the
    fixed prefix of the one before it (not the passages they share), unless it extends it (retry, follow-up)."""
    from tiny_gguf import write_tiny_gguf

    from app.copilot.prompting import shared_prompt_ids
    from generation.engine import Engine
    from generation.llamacpp_lm import LlamaCppLM

    gguf = write_tiny_gguf(tmp_path / "target.gguf")
    tokenizer = tiny_models[2]
    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path / "home"))

    def copilot():
        runner = LlamaCppLM(gguf, n_ctx=4096, row_invariant=False)
        loaded = loading.LoadedEngine(Engine(runner, tokenizer), "/models/tiny.gguf", None)
        return Copilot(loaded, CopilotOptions(answer=AnswerOptions(max_new_tokens=12)), runbook_retriever(RUNBOOK))

    alone = collect(copilot().answer("Where do munge keys live?"))
    after = copilot()
    first = collect(after.answer("How do I drain a node?"))
    second = collect(after.answer("Where do munge keys live?"))  # the same three passages as the first
    fixed = len(shared_prompt_ids(tokenizer))
    assert len(first.prompt_ids) > fixed + 50 and first.prompt_ids[: fixed + 50] == second.prompt_ids[: fixed + 50]
    assert second.stats["prefilled_tokens"] == len(second.prompt_ids) - 1 - fixed
    assert second.output_ids == alone.output_ids
    retried = collect(after.answer("Where do munge keys live?"))
    assert retried.stats["prefilled_tokens"] == 0 and retried.output_ids == alone.output_ids
    follow_up = collect(after.answer("And on the login node?", history=[retried.turn]))
    # it extends the last prompt: all of it but its last token (fed with the answer) is reused
    assert follow_up.stats["prefilled_tokens"] == len(follow_up.prompt_ids) - len(retried.prompt_ids)


def test_an_answer_is_computed_in_the_same_pieces_whether_or_not_the_judge_was_asked(
    tiny_models, monkeypatch, tmp_path, calibrated
):
    """A judged answer goes on from the judge's prompt; an unjudged one is computed up to its closing line first,
    so both compute their prompt in the same passes (llamacpp-f16's logits depend on them)."""
    from tiny_gguf import write_tiny_gguf

    from app.copilot import gate
    from app.copilot.prompting import shared_prompt_ids
    from generation.engine import Engine
    from generation.llamacpp_lm import LlamaCppLM

    gguf = write_tiny_gguf(tmp_path / "target.gguf")
    tokenizer = tiny_models[2]
    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(gate.JUDGE_THRESHOLDS, "tiny", -1e9)
    monkeypatch.setitem(gate.JUDGE_VETOES, "tiny", -1e9)  # the judge is asked above the threshold, and never vetoes
    fixed = len(shared_prompt_ids(tokenizer))

    def answer(gate_mode):
        runner = LlamaCppLM(gguf, n_ctx=4096, row_invariant=False)
        passes = []  # (cached positions, tokens fed) of every llama.cpp pass after the fixed prefix
        decode = runner._decode
        runner._decode = lambda chunk, wanted: (passes.append((runner.length, len(chunk))), decode(chunk, wanted))[1]
        loaded = loading.LoadedEngine(Engine(runner, tokenizer), "/models/tiny.gguf", None, target="tiny")
        options = CopilotOptions(answer=AnswerOptions(max_new_tokens=12, gate=gate_mode))
        final = collect(Copilot(loaded, options, runbook_retriever(RUNBOOK)).answer("Where do munge keys live?"))
        return final, [piece for piece in passes if piece[0] >= fixed]

    unjudged, plain_passes = answer("off")
    judged, judged_passes = answer("refuse")
    assert unjudged.relevance is None and isinstance(judged.relevance["judged"], float) and not judged.gated
    closing = plain_passes[1][0]  # the prompt up to its closing line, then the closing line
    assert plain_passes[0] == (fixed, closing - fixed) and len(judged.prompt_ids) - 1 > closing
    # the judge's closing line is the one pass the judged answer adds (it is cropped again); the rest is the same
    extra = [piece for piece in judged_passes if piece not in plain_passes]
    assert len(extra) == 1 and extra[0][0] == closing and judged_passes.remove(extra[0]) is None
    assert judged_passes == plain_passes and judged.output_ids == unjudged.output_ids


@pytest.mark.parametrize("runner", ["torch", "llama.cpp"])
def test_a_follow_up_after_a_stopped_answer_goes_on_from_the_turn_before_it_in_the_same_pieces(
    runner, tiny_engine, tiny_models, monkeypatch, tmp_path
):
    # Stop in the chat leaves the stopped question's prompt in the cache, and the next question leaves it out of
    # the history. It used to fall back to the fixed prefix and prefill the whole conversation again; it now
    # goes on from the end of the first turn, the piece it would have started from had nothing come between.
    # On llama.cpp with its f16 cache (llamacpp-f16) logits depend on those pieces: the answers must match
    from tiny_gguf import write_tiny_gguf

    from generation.engine import Engine
    from generation.llamacpp_lm import LlamaCppLM

    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path / "home"))
    gguf = write_tiny_gguf(tmp_path / "target.gguf") if runner == "llama.cpp" else None

    def fresh():
        if gguf is None:
            loaded = loading.load_engine(ModelOptions())
        else:
            engine = Engine(LlamaCppLM(gguf, n_ctx=4096, row_invariant=False), tiny_models[2])
            loaded = loading.LoadedEngine(engine, "/models/tiny.gguf", None)
        return Copilot(loaded, CopilotOptions(answer=AnswerOptions(max_new_tokens=12)), runbook_retriever(RUNBOOK))

    copilot = fresh()
    first = collect(copilot.answer("How do I drain a node?"))
    stopped = copilot.answer("And how long does that take?", history=[first.turn])
    next(e for e in stopped if isinstance(e, Token) and e.token_ids)
    stopped.close()  # the operator pressed Stop
    after_stop = collect(copilot.answer("And how do I undo it?", history=[first.turn]))

    direct = fresh()  # the same conversation with nothing in between
    again = collect(direct.answer("How do I drain a node?"))
    straight = collect(direct.answer("And how do I undo it?", history=[again.turn]))

    assert after_stop.prompt_ids == straight.prompt_ids
    assert after_stop.stats["prefilled_tokens"] == straight.stats["prefilled_tokens"]
    assert after_stop.stats["prefilled_tokens"] < len(after_stop.prompt_ids) - len(first.prompt_ids) + 1
    assert after_stop.output_ids == straight.output_ids


@pytest.mark.parametrize("runner", ["llamacpp-f16", "torch"])
def test_a_question_back_in_the_conversation_after_a_detour_reuses_its_cache_and_gets_the_same_answer(
    tiny_models, monkeypatch, tmp_path, runner
):
    # A question asked alone between two turns (a new topic, or one the gate refuses) used to drop the
    # conversation from the cache, and the next question of the conversation prefilled all of it again
    # (7.3 s against 4.1 s in the web chat, session 44). The cache is parked and put back (parking.py): the
    # question back prefills what it would have with nothing in between and, on llamacpp-f16, whose logits
    # depend on how a prompt is split into passes, gets the same answer.
    from tiny_gguf import write_tiny_gguf

    from app.copilot import parking
    from generation.engine import Engine
    from generation.llamacpp_lm import LlamaCppLM

    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(parking, "PARK_MIN_TOKENS", 16)  # the tiny runbook's prompts are short
    gguf = write_tiny_gguf(tmp_path / "target.gguf")

    def fresh():
        model = LlamaCppLM(gguf, n_ctx=4096, row_invariant=False) if runner == "llamacpp-f16" else tiny_models[0]
        engine = Engine(model, tiny_models[2])
        loaded = loading.LoadedEngine(engine, "/models/tiny.gguf", None)
        return Copilot(loaded, CopilotOptions(answer=AnswerOptions(max_new_tokens=12)), runbook_retriever(RUNBOOK))

    copilot = fresh()
    first = collect(copilot.answer("How do I drain a node?"))
    # two other conversations take their turns: each shares only the fixed prefix with the one before it
    detour = collect(copilot.answer("Where do munge keys live?"))
    other = collect(copilot.answer("How do I restart slurmd?"))
    back = collect(copilot.answer("And how do I undo it?", history=[first.turn]))

    direct = fresh()  # the same conversation with nothing in between
    again = collect(direct.answer("How do I drain a node?"))
    straight = collect(direct.answer("And how do I undo it?", history=[again.turn]))

    assert detour.stats["prefilled_tokens"] > 16 and other.stats["prefilled_tokens"] > 16
    assert back.prompt_ids == straight.prompt_ids
    assert back.stats["prefilled_tokens"] == straight.stats["prefilled_tokens"]
    assert back.stats["prefilled_tokens"] < len(back.prompt_ids) - len(first.prompt_ids) + 1
    assert back.output_ids == straight.output_ids
    # both others were parked in turn (within PARKED_POSITIONS): asked again, each is taken back whole
    for earlier in (detour, other):
        retried = collect(copilot.answer(earlier.question))
        assert retried.stats["prefilled_tokens"] == 0 and retried.output_ids == earlier.output_ids
    # a Copilot that never goes back to a conversation (the eval) parks nothing
    eval_like = fresh()
    eval_like._parking.budget = 0
    for question in ("How do I drain a node?", "Where do munge keys live?", "How do I drain a node?"):
        last = collect(eval_like.answer(question))
    assert not eval_like._parking.parked and last.stats["prefilled_tokens"] > 16


def test_a_cache_is_parked_only_where_the_runner_can_copy_it_out_and_enough_would_be_dropped():
    from app.copilot import parking

    class Runner:
        tokens, snapshot_length = [1, 2, 3], 3 + parking.PARK_MIN_TOKENS

        def snapshot_prefix(self, ids):
            return 3

    assert parking.park(Runner(), keep=0, piece_starts=[0], pieces_of=[]) is None  # no state_bytes

    class Stateful(Runner):
        state_key = load_state = lambda self, *a: None

        def state_bytes(self):
            return memoryview(b"kv")

    parked = parking.park(Stateful(), keep=3, piece_starts=[0, 2], pieces_of=[1, 2, 3])
    assert parked is not None and parked.tokens == [1, 2, 3] and parked.piece_starts == [0, 2]
    assert parking.park(Stateful(), keep=4, piece_starts=[0], pieces_of=[]) is None  # drops too little
    lot = parking.ParkingLot(budget=7)  # positions: two caches of 3 fit, a third does not
    for starts in ([0], [1], [2]):
        lot.park(Stateful(), keep=3, piece_starts=starts, pieces_of=[])
    assert [p.piece_starts for p in lot.parked] == [[2], [1]]  # the most recent two
    assert lot.positions == 6 and lot.nbytes == 4
    tight = parking.ParkingLot(budget=2)  # a cache larger than the whole budget is not kept
    tight.park(Stateful(), keep=3, piece_starts=[0], pieces_of=[])
    assert tight.parked == []
    with pytest.raises(Exception, match="park_positions"):
        CopilotOptions(park_positions=-1)
    assert CopilotOptions().park_positions == parking.PARKED_POSITIONS


def test_an_answer_caught_in_a_loop_stops_and_says_why(copilot):
    # the tiny target repeats itself; a 4-token run seen 3 times ends the answer early
    question = "How do I drain a node?"
    free = collect(copilot.answer(question, options=AnswerOptions(max_new_tokens=120, repeat_span=0)))
    guarded = collect(copilot.answer(question, options=AnswerOptions(max_new_tokens=120, repeat_span=4)))
    assert free.finish_reason != "repeat" and guarded.finish_reason == "repeat"
    assert free.answer.startswith(guarded.answer) and len(guarded.output_ids) < len(free.output_ids)
    assert guarded.finish_label == "stopped: the answer was repeating itself"
    with pytest.raises(Exception, match="repeat_span"):
        AnswerOptions(repeat_span=-1)


def test_an_answer_that_opens_a_line_with_a_source_past_the_last_stops_there(copilot, monkeypatch):
    """fresh7 `s7-06`: steps numbered [1] .. [9] with six sources, `scontrol takeover` over and over."""
    from generation.drafters.base import Origin
    from generation.engine import Event
    from generation.stats import Stats

    stops = []
    text = "[1] Drain it:\n\n```\nscontrol update NodeName=<node> State=DRAIN\n```"

    def generate(prompt_ids, chunks, config, token_filter=None):
        stops.append(config.stop_strings)  # the engine stops at any of them (generation/stopping.py)
        ids = copilot.engine.tokenizer(text, add_special_tokens=False)["input_ids"]
        yield Event(text, ids, [Origin("target")] * len(ids), Stats(new_tokens=len(ids)), "stop")

    monkeypatch.setattr(copilot.engine, "generate", generate)
    final = collect(copilot.answer("How do I drain a node?"))
    assert stops[0] == (f"\n[{len(final.passages) + 1}]",) and len(final.passages) >= 1
    assert final.finish_reason == "past_sources" and final.answer == text
    assert final.finish_label == "stopped: the answer went on to a source that does not exist"
    # a stop string of the caller's own keeps its plain reason
    final = collect(copilot.answer("How do I drain a node?", options=AnswerOptions(stop=("END",))))
    assert stops[1] == ("END", f"\n[{len(final.passages) + 1}]") and final.finish_reason == "stop"


@pytest.mark.parametrize(
    "question, similarity, searched_alone",
    [
        ("Where do those munge keys live?", 0.9, True),  # it stands on its own: the gate's threshold is met
        ("Where do those munge keys live?", 0.3, False),  # it refers back and does not stand alone
        ("Who is on call for the munge service tonight?", 0.3, True),  # it names its own subject
    ],
)
def test_a_follow_up_is_searched_with_the_previous_question_only_if_it_needs_it(
    tiny_engine, question, similarity, searched_alone
):
    from app.copilot.gate import THRESHOLDS

    calibrated = next(iter(THRESHOLDS))  # an embedding model the gate has a threshold for
    retriever = FakeRetriever(
        [(f"runbook-{i}.md", t) for i, t in enumerate(RUNBOOK)], similarity=similarity, embedder=Embedder(calibrated)
    )
    copilot = Copilot(
        loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(max_new_tokens=8)), retriever
    )
    first = collect(copilot.answer("How do I drain a node?", options=AnswerOptions(max_new_tokens=8, gate="off")))
    retriever.queries.clear()
    _, query = copilot.retrieve_for(question, [first.turn], 3)
    expected = question + ("" if searched_alone else "\nHow do I drain a node?")
    # the question alone is always tried first; one that refers back is tried with the previous one too
    assert query == expected and retriever.queries[0] == question
    assert retriever.queries[1:] == ([] if "those" not in question else [f"{question}\nHow do I drain a node?"])
    if searched_alone and similarity < THRESHOLDS[calibrated]:
        # judged on its own passages, the gate refuses it instead of answering from the old topic's
        final = collect(copilot.answer(question, history=[first.turn]))
        assert final.gated and final.finish_reason == "gated"
    # without a calibrated threshold (any other embedding model) only a question that refers back keeps the
    # previous question
    retriever.embedder = Embedder("another-model")
    refers_back = "those" in question
    assert copilot.retrieve_for(question, [first.turn], 3)[1].endswith("\nHow do I drain a node?") == refers_back


@pytest.mark.parametrize("similarity, alone", [(0.9, True), (0.3, False)])
def test_a_question_searched_alone_numbers_its_sources_from_one_and_keeps_earlier_turns_bare(
    tiny_engine, similarity, alone
):
    from app.copilot.gate import THRESHOLDS

    retriever = FakeRetriever(
        [(f"runbook-{i}.md", t) for i, t in enumerate(RUNBOOK)],
        similarity=similarity,
        embedder=Embedder(next(iter(THRESHOLDS))),
    )
    options = AnswerOptions(max_new_tokens=8, gate="off")
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(answer=options), retriever)
    first = collect(copilot.answer("How do I drain a node?"))
    follow = collect(copilot.answer("Where do those munge keys live?", history=[first.turn]))
    prompt = copilot.engine.tokenizer.decode(follow.prompt_ids)
    assert "How do I drain a node?" in prompt and first.answer.strip() in prompt  # the conversation stays
    if alone:
        # its own sources, numbered from [1] as the demonstration's are: the model's habit of opening
        # with [1] then names one of them, not the earlier turn's first passage
        assert [p.number for p in follow.turn.passages] == [1, 2, 3]
        assert prompt.count(RUNBOOK[0]) == 1 and tuple(follow.passages) == follow.turn.passages
    else:  # a follow-up that leans on the earlier turn keeps its passages, citable under their numbers
        assert follow.turn.passages == () and [p.number for p in follow.passages] == [1, 2, 3]
        assert follow.prompt_ids[: len(first.prompt_ids)] == first.prompt_ids


def test_a_follow_up_after_a_question_searched_alone_extends_its_prompt_under_unique_numbers(tiny_engine):
    # Seen in the chat: a third question that refers back kept the first turn whole again, although the second
    # (searched alone) had numbered its own sources from [1]: two passages stood under [1], the sources list
    # mixed them, and the prompt no longer extended the second one, so all of it was prefilled again
    from app.copilot.gate import THRESHOLDS

    retriever = FakeRetriever(
        [(f"runbook-{i}.md", t) for i, t in enumerate(RUNBOOK)],
        similarity=0.3,  # below the threshold: nothing stands alone, so only the words decide
        embedder=Embedder(next(iter(THRESHOLDS))),
    )
    options = AnswerOptions(max_new_tokens=8, gate="off")
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(answer=options), retriever)
    first = collect(copilot.answer("How do I drain a node?"))
    second = collect(copilot.answer("Who is on call for the munge service tonight?", history=[first.turn]))
    assert [p.number for p in second.turn.passages] == [1, 2, 3]  # searched alone: numbered from [1]
    third = collect(copilot.answer("And where do those keys live?", history=[first.turn, second.turn]))
    numbers = [p.number for p in third.passages]
    assert len(numbers) == len(set(numbers)), numbers
    assert third.prompt_ids[: len(second.prompt_ids)] == second.prompt_ids
    assert third.stats["prefilled_tokens"] == len(third.prompt_ids) - len(second.prompt_ids)


def test_a_follow_up_after_a_refused_question_searched_alone_keeps_the_turns_before_it_bare(tiny_engine):
    # Seen in the chat: a refused new topic holds no passages numbered from [1] to show it kept the first turn
    # bare, so the follow-up after it put the first turn's passages back and shared only the fixed prefix with
    # the cached judge prompt: the whole conversation was prefilled again (49.8 s to the first token)
    from app.copilot.gate import THRESHOLDS

    retriever = FakeRetriever(
        [(f"runbook-{i}.md", t) for i, t in enumerate(RUNBOOK)], embedder=Embedder(next(iter(THRESHOLDS)))
    )
    copilot = Copilot(
        loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(max_new_tokens=8)), retriever
    )
    first = collect(copilot.answer("How do I drain a node?"))
    retriever.similarity = 0.3  # below the threshold: the new topic is searched alone and refused
    second = collect(copilot.answer("Who is on call for the munge service tonight?", history=[first.turn]))
    assert second.gated and second.turn.kept_earlier_bare and not first.turn.kept_earlier_bare
    # leans on the conversation and does not stand alone: searched with the drain question, answered ungated
    third = collect(
        copilot.answer(
            "And where do those keys live?", [first.turn, second.turn], AnswerOptions(max_new_tokens=8, gate="off")
        )
    )
    assert retriever.queries[-1].endswith("\nHow do I drain a node?")
    # its own sources, numbered from [1]; the first turn stays bare, as in the judge prompt of the second
    assert [p.number for p in third.passages] == [1, 2, 3] and third.turn.passages == tuple(third.passages)
    prompt = copilot.engine.tokenizer.decode(third.prompt_ids)
    assert prompt.count(RUNBOOK[0]) == 1 and first.answer.strip() in prompt


def test_the_passages_status_says_whether_a_follow_up_was_searched_with_the_previous_question(copilot):
    def searched_with_previous(events):
        status = next(e for e in events if isinstance(e, Status) and e.stage == "passages")
        return status.detail["searched_with_previous"]

    first = list(copilot.answer("How do I drain a node?"))
    assert searched_with_previous(first) == 0
    final = next(e for e in first if isinstance(e, Final))
    follow = list(copilot.answer("And how do I undo it?", history=[final.turn]))
    assert searched_with_previous(follow) == 1  # no calibrated threshold here: it leans on the conversation
    # the status line Slack shows says so too
    assert any(
        e.message.endswith("searched together with your previous question") for e in follow if isinstance(e, Status)
    )
    # a follow-up of a follow-up is searched with both questions before it
    second = next(e for e in follow if isinstance(e, Final))
    again = list(copilot.answer("And why would it fail?", history=[final.turn, second.turn]))
    assert searched_with_previous(again) == 2
    assert any(e.message.endswith("with your 2 previous questions") for e in again if isinstance(e, Status))


@pytest.mark.parametrize(
    "question, leans",
    [
        ("And how do I cancel one of them?", True),
        ("What do the columns of that output mean?", True),
        ("What about GPU nodes?", True),
        ("Can I see only her pending jobs?", True),  # a person named in the previous question
        ("Who do I ask to raise his limit?", True),
        ("Why?", True),
        ("Any side effects?", True),
        ("What does the reason Resources mean there?", True),  # "there" as a place points back
        ("How do I ask for a GPU there too?", True),
        ("Is there a way to list every reservation?", False),  # the existential "there" does not
        ("There are no jobs running on the cluster, why not?", False),
        ("Who is on call for the Lustre filesystem tonight?", False),
        ("Is there a way to list every reservation?", False),
        ("How many euros does one GPU hour cost?", False),
    ],
)
def test_a_question_leans_on_the_conversation_by_its_words(question, leans):
    from app.copilot.conversation import refers_back

    assert refers_back(question) is leans


@pytest.mark.parametrize("joint_similarity, searched_with_previous", [(0.75, True), (0.62, False)])
def test_a_follow_up_that_passes_the_gate_alone_keeps_the_previous_question_where_it_finds_closer_passages(
    joint_similarity, searched_with_previous
):
    # "How do I run a command on all the nodes it gave me?" after a question on salloc passes the gate alone
    # (srun's options at 0.60) but finds salloc's page with the previous question (0.78): it leans on it
    from app.copilot import Passage, Turn
    from app.copilot.conversation import LEANING_GAIN, follow_up_passages

    history = [Turn("How do I start an interactive allocation with salloc?", "answer", ())]
    question = "How do I run a command on all the nodes it gave me?"
    assert 0.75 - 0.6 >= LEANING_GAIN > 0.62 - 0.6
    similarity = {question: 0.6}
    queries = []

    def retrieve(query):
        queries.append(query)
        return [Passage(1, query, "a.md", similarity=similarity.get(query, joint_similarity))]

    passages, query = follow_up_passages(question, history, retrieve, lambda passages: True)
    assert (query != question) is searched_with_previous and passages[0].text == query
    assert queries == [question, f"{question}\n{history[0].question}"]
    queries.clear()  # a question that names its own subject is searched alone, once
    assert follow_up_passages("How do I drain node c042?", history, retrieve, lambda passages: True)[1] == (
        "How do I drain node c042?"
    )
    assert queries == ["How do I drain node c042?"]


def test_a_follow_up_on_an_option_an_earlier_question_wrote_out_is_searched_with_it():
    # "what about srun?" after sbatch's --exclusive passes the gate alone, but alone it finds srun's pages
    # without the option's entry; with the earlier question the entry is looked up on srun's page
    from app.copilot import Passage, Turn
    from app.copilot.conversation import follow_up_passages

    history = [Turn("What does the --exclusive option of sbatch do?", "answer", ())]

    def retrieve(query):
        return [Passage(1, query, "a.md", similarity=0.7)]  # the joint query finds nothing closer

    assert follow_up_passages("what about srun?", history, retrieve, lambda passages: True)[1] == (
        "what about srun?\nWhat does the --exclusive option of sbatch do?"
    )
    # one that writes out its own name, or goes on from a question that wrote none, is searched as before
    assert (
        follow_up_passages("and --exclusive in srun?", history, retrieve, lambda p: True)[1]
        == "and --exclusive in srun?"
    )
    plain = [Turn("How do I give a job whole nodes with sbatch?", "answer", ())]
    assert follow_up_passages("what about srun?", plain, retrieve, lambda passages: True)[1] == "what about srun?"


def test_a_follow_up_after_a_refused_question_goes_back_to_the_topic_before_it(tiny_engine):
    from app.copilot.conversation import retrieval_query
    from app.copilot.gate import THRESHOLDS

    retriever = FakeRetriever(
        [(f"runbook-{i}.md", t) for i, t in enumerate(RUNBOOK)],
        similarity=0.3,
        embedder=Embedder(next(iter(THRESHOLDS))),
    )
    copilot = Copilot(
        loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(max_new_tokens=8)), retriever
    )
    first = collect(copilot.answer("How do I drain a node?", options=AnswerOptions(max_new_tokens=8, gate="off")))
    refused = collect(copilot.answer("Who is on call for the tape library tonight?", history=[first.turn]))
    assert refused.gated and refused.turn.refused and not first.turn.refused
    _, query = copilot.retrieve_for("And how do I undo it?", [first.turn, refused.turn], 3)
    assert query == "And how do I undo it?\nHow do I drain a node?"
    assert retrieval_query("why?", [refused.turn]) == "why?"  # nothing answered to go back to


def test_a_follow_up_to_a_follow_up_is_searched_with_the_question_that_named_the_subject():
    from app.copilot.conversation import retrieval_query
    from app.copilot.events import Turn

    def turn(question):
        return Turn(question, "an answer [1]", ())

    named = turn("How do I drain node c042 for maintenance?")
    leaning = turn("and once it's fixed, how do I put it back?")
    query = retrieval_query("which jobs are still running on it?", [named, leaning])
    assert query == "which jobs are still running on it?\nand once it's fixed, how do I put it back?\n" + named.question
    # the previous question names its own subject: it alone, as before
    assert retrieval_query("and on it?", [leaning, named]) == "and on it?\n" + named.question
    # at most CHAIN questions back, however long the chain of pronouns
    assert retrieval_query("why?", [named, leaning, turn("and then?")]) == "why?\nand then?\n" + leaning.question


def test_with_the_index_first_the_index_opens_while_the_models_load_in_this_thread(tiny_engine, monkeypatch, tmp_path):
    import retrieval.live

    load_started, index_opened = threading.Event(), threading.Event()
    tiny_load = loading.load_engine
    loaders = []

    def slow_load(models):
        loaders.append(threading.current_thread())
        load_started.set()
        assert index_opened.wait(10), "the index was not opened while the models loaded"
        return tiny_load(models)

    def open_index(index_dir):
        assert load_started.wait(10), "the models did not start loading before the index was opened"
        index_opened.set()
        return runbook_retriever(RUNBOOK)

    monkeypatch.setattr(loading, "load_engine", slow_load)
    monkeypatch.setattr(retrieval.live, "LiveRetriever", open_index)
    monkeypatch.setattr("retrieval.store.require_live", lambda index_dir: index_dir)  # the fake index exists
    copilot = Copilot.load(CopilotOptions(answer=AnswerOptions(max_new_tokens=4)), open_index_first=True)
    assert loaders == [threading.main_thread()]  # a path's per-thread settings stay with the generating thread
    assert copilot.retrieve("drain a node", 1)
    assert collect(copilot.answer("How do I drain a node?")).stats["new_tokens"] > 0


def test_the_modules_both_threads_import_are_imported_before_the_index_thread_starts():
    # transformers' lazy modules are not safe to import from two threads at once: the chat's start once failed with
    # "cannot import name 'AutoModel' from 'transformers'" in the index thread. A fresh process, as the chat starts.
    script = """
import sys
from app.copilot import loading, pipeline
from app.copilot.options import CopilotOptions
seen = []
auto = ('transformers.models.auto.modeling_auto', 'transformers.models.auto.tokenization_auto')
pipeline.Copilot._open_index = classmethod(lambda cls, options, need: seen.append(all(m in sys.modules for m in auto)))
loading.load_engine = lambda models: None
pipeline.Copilot.__init__ = lambda self, *args: None
pipeline.Copilot.load(CopilotOptions(), open_index_first=True, need_index=False)
print(seen)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[True]"


def test_a_missing_index_is_reported_before_the_models_load(tiny_engine, monkeypatch, tmp_path):
    from retrieval.errors import RetrievalError

    loads = []
    monkeypatch.setattr(loading, "load_engine", loads.append)
    with pytest.raises(RetrievalError, match="ingest"):
        Copilot.load(CopilotOptions(index_dir=tmp_path / "nowhere"), open_index_first=True)
    assert loads == []


def test_without_need_index_a_missing_index_loads_the_models_and_each_question_reports_it(
    tiny_engine, monkeypatch, tmp_path
):
    from app.web.backend import Backend
    from retrieval.errors import RetrievalError

    options = CopilotOptions(index_dir=tmp_path / "nowhere", answer=AnswerOptions(max_new_tokens=4))
    copilot = Copilot.load(options, open_index_first=True, need_index=False)
    assert copilot.loaded is not None
    with pytest.raises(RetrievalError, match="ingest"):
        copilot.retrieve("drain a node", 1)
    backend = Backend(options).start()  # the chat's own loader: the page serves and says what is missing
    assert backend.wait(60) and backend.state().phase == "ready"


def test_an_index_searched_elsewhere_is_let_go_the_gate_still_reads_its_model_and_a_later_search_reopens_it(
    tiny_engine, monkeypatch
):
    import retrieval.live

    opened = []

    def open_index(index_dir):
        opened.append(runbook_retriever(RUNBOOK))
        return opened[-1]

    monkeypatch.setattr(retrieval.live, "LiveRetriever", open_index)
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(max_new_tokens=4)))
    passages, _ = copilot.retrieve_for("How do I drain a node?", (), 2)
    model = copilot.embedding_model
    copilot.searched_with(model)  # as ask does with the model its search process reports
    assert copilot._retriever is None and copilot.embedding_model == model and len(opened) == 1
    final = collect(copilot.answer("How do I drain a node?", passages=passages))
    assert final.stats["new_tokens"] > 0 and len(opened) == 1  # answered without opening the index again
    assert copilot.retrieve("drain a node", 1) and len(opened) == 2


def test_final_reports_a_sources_sentence_told_of_another_setting(tiny_engine, monkeypatch):
    sentence = "The OverTimeLimit configuration parameter may permit the job to run longer than scheduled."
    retriever = FakeRetriever([("slurm.conf.html", sentence)], title="slurm.conf", heading="PARAMETERS")
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(), retriever)
    scripted_answer(copilot, monkeypatch, "[1] " + sentence.replace("OverTimeLimit", "KillWait"))
    final = collect(copilot.answer("Can a job run past its time limit?"))
    assert [(d.said_of, d.term, d.source) for d in final.definitions] == [("KillWait", "OverTimeLimit", 1)]


def test_the_judge_gives_the_same_log_odds_when_the_same_prompt_is_judged_again(copilot, judged):
    # Seen in bench_follow_up_gate: a prompt the cache held whole had its last token fed alone, in a pass of
    # another shape, and the judge's log-odds moved (0.50 -> 0.38 on the int4 path): asked again, the same
    # question could get another verdict. It is now computed again in the piece it was computed in first.
    passages = copilot.retrieve("How do I drain a node?", 3)
    first = copilot.judge("How do I drain a node?", passages)
    again = copilot.judge("How do I drain a node?", passages)
    assert again == first
    assert copilot.engine.target.reused < copilot.engine.target.length - 1  # not taken whole
