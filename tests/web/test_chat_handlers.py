"""The chat's handlers in-process on the tiny hand-wired model: streaming, history, stop, errors, feedback."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

import gradio as gr
import pytest
from copilot_fakes import FakeRetriever
from tiny_chat import CYCLE, FIXTURE_DOCS, bigram_chat_model

from app.copilot import AnswerOptions, Copilot, CopilotOptions, LoadedEngine, Token
from app.feedback import FeedbackStore
from app.web import chat
from app.web.backend import Backend
from app.web.session import ChatState, Exchange
from generation.engine import Engine
from generation.errors import ModelError
from tiny import byte_tokenizer

# repeat_span 0: the bigram model loops, and the stop tests need long answers
OPTIONS = {"temperature": 0.0, "passages": 3, "speculation": "hybrid", "max_new_tokens": 48, "repeat_span": 0}


def fixture_retriever() -> FakeRetriever:
    return FakeRetriever(list(FIXTURE_DOCS.items()))


@pytest.fixture(scope="module")
def engine():
    model = bigram_chat_model()
    return Engine(model, byte_tokenizer(), model)


def ready_backend(engine, tmp_path, retriever=None, index_dir=None) -> Backend:
    options = CopilotOptions(index_dir=index_dir, answer=AnswerOptions(**OPTIONS))

    def loader(opts):
        return Copilot(LoadedEngine(engine, "/models/bigram", "/models/bigram"), opts, retriever)

    backend = Backend(options, feedback=FeedbackStore(tmp_path / "feedback.db"), loader=loader).start()
    assert backend.wait(30) and backend.state().phase == "ready"
    return backend


def answer_of(messages) -> str:
    return messages[2]["content"] if len(messages) > 2 else ""


def test_the_sources_are_listed_while_the_prompt_is_prefilled(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    steps = list(chat.respond(backend, "How do I rotate the glyph bank?", None, OPTIONS, None, event_delay=0.06))
    first_words = next(messages for messages, _ in steps if answer_of(messages))
    titles = [line for line in first_words[1]["content"].splitlines() if line.startswith("- [")]
    assert titles == [f"- [{n}] Runbook › Section" for n in (1, 2, 3)]  # the fixture retriever's title and heading


def test_answer_streams_then_ends_with_sources_stats_and_provenance(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    steps = list(chat.respond(backend, "How do I rotate the glyph bank?", None, OPTIONS, None, event_delay=0.06))
    thoughts = [messages[1]["metadata"]["title"] for messages, _ in steps]
    assert thoughts[0] == "waiting for the engine…" and any("searching" in t for t in thoughts)
    answers = [answer_of(messages) for messages, _ in steps]
    assert len({a for a in answers if a}) >= 2, "the answer did not stream"
    final = steps[-1][0][2]["content"]
    assert CYCLE.strip()[:10] in final and "sr-sources" in final and "tok/s" in final and 'class="prov' in final
    assert steps[-1][0][1]["metadata"]["status"] == "done"
    status = steps[-1][0][1]["metadata"]  # the time to the first token is said once, in the title
    assert "first token after" in status["title"] and "duration" not in status


def test_follow_up_passes_the_history_on(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    *_, (_, state) = chat.respond(backend, "How do I rotate the glyph bank?", None, OPTIONS, None)
    *_, (messages, state) = chat.respond(backend, "And after that?", state, OPTIONS, None)
    assert len(state.history()) == 2 and "with 1 earlier turn" in messages[-2]["metadata"]["title"]


def test_stop_ends_the_answer_within_a_pass_and_frees_the_engine(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    steps = chat.respond(backend, "Read it all out", None, OPTIONS | {"max_new_tokens": 1024}, None)
    for messages, state in steps:  # noqa: B007 - the last state is read below
        if answer_of(messages):
            backend.stop_flag("default").set()
    exchange = state.exchanges[-1]
    assert exchange.note == "stopped" and exchange.final is None and len(exchange.answer) < 1024
    assert not backend.copilot().busy and state.history() == []


def test_a_closed_stream_disconnect_frees_the_engine(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    steps = chat.respond(backend, "Read it all out", None, OPTIONS | {"max_new_tokens": 1024}, None)
    for messages, _ in steps:
        if answer_of(messages):
            assert backend.copilot().busy
            break
    steps.close()  # what gradio does on disconnect or new conversation
    assert not backend.copilot().busy


@pytest.mark.parametrize(
    ("question", "expected"),
    [("   ", "the question is empty"), ("why? " * 2000, "exceeds the model")],
    ids=["empty", "over-budget"],
)
def test_bad_questions_get_a_message_in_the_chat(engine, tmp_path, question, expected):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    *_, (messages, _) = chat.respond(backend, question, None, OPTIONS, None)
    assert expected in messages[-1]["content"] and "sr-error" in messages[-1]["content"]
    assert not backend.copilot().busy


def test_a_missing_index_is_explained_in_the_chat(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, retriever=None, index_dir=tmp_path / "no-index")
    *_, (messages, _) = chat.respond(backend, "How do I drain a node?", None, OPTIONS, None)
    assert "no index at" in messages[-1]["content"] and "specrag ingest" in messages[-1]["content"]


def test_an_index_that_gives_no_passages_is_flagged_above_the_answer(engine, tmp_path):
    class Empty:
        def retrieve(self, query, k):
            return []

    backend = ready_backend(engine, tmp_path, Empty())
    *_, (messages, _) = chat.respond(backend, "How do I drain a node?", None, OPTIONS, None)
    # above the answer, in its own message: the warning heads it, the sources follow
    warning, answer = messages[2]["content"].split("\n\n", 1)
    assert "no passages: the index is empty" in warning and "Sources" in answer and len(messages) == 3


def test_a_model_that_fails_to_load_is_shown_and_the_server_keeps_serving(tmp_path):
    def loader(options):
        raise ModelError("cannot load a causal LM from /nowhere")

    backend = Backend(CopilotOptions(), feedback=FeedbackStore(tmp_path / "f.db"), loader=loader).start()
    assert backend.wait(30) and backend.state().phase == "failed"
    assert "failed to load" in chat.banner(backend)[0]
    *_, (messages, _) = chat.respond(backend, "anything", None, OPTIONS, None)
    assert "the models failed to load: cannot load a causal LM" in messages[-1]["content"]


def test_a_question_asked_while_models_load_waits_for_them(engine, tmp_path):
    release = threading.Event()

    def loader(options):
        release.wait(10)
        return Copilot(LoadedEngine(engine, "/models/bigram", None), options, fixture_retriever())

    backend = Backend(CopilotOptions(), feedback=FeedbackStore(tmp_path / "f.db"), loader=loader).start()
    steps = chat.respond(backend, "How do I rotate the glyph bank?", None, OPTIONS, None)
    next(steps)
    messages, _ = next(steps)
    assert "waiting for the models to load" in messages[1]["metadata"]["title"]
    assert "Starting" in chat.banner(backend)[0]
    release.set()
    *_, (messages, state) = steps
    assert state.exchanges[-1].final is not None
    # ready: the models and the numeric path they run on (llamacpp-f16 decodes plainly, so say which)
    assert "Ready" in chat.banner(backend)[0] and "path none" in chat.banner(backend)[0]
    assert chat.speculation_choices(backend) == gr.skip()  # this path verifies drafts: every mode stays


def test_the_banner_says_how_long_loading_took_not_how_long_the_server_has_run(engine, tmp_path, monkeypatch):
    import app.web.backend as backend_module

    clock = [1000.0]
    monkeypatch.setattr(backend_module.time, "monotonic", lambda: clock[0])
    loaded = threading.Event()

    def loader(options):
        clock[0] += 42.0  # the load takes 42 s
        loaded.set()
        return Copilot(LoadedEngine(engine, "/models/bigram", None), options, fixture_retriever())

    backend = Backend(CopilotOptions(), feedback=FeedbackStore(tmp_path / "f.db"), loader=loader).start()
    assert backend.wait(30) and loaded.is_set()
    clock[0] += 3600.0  # the page is opened an hour later
    assert backend.state().elapsed_s == 42.0
    assert "loaded in 42 s" in chat.banner(backend)[0]


def test_on_a_path_that_cannot_verify_drafts_the_radio_offers_only_plain_decoding(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(type(engine.target), "max_pass_rows", property(lambda self: 1))  # as llamacpp-f16's runner
    loaded = LoadedEngine(engine, "/models/bigram", None, quant="llamacpp-f16")
    backend = Backend(CopilotOptions(), loader=lambda options: Copilot(loaded, options, fixture_retriever())).start()
    assert backend.wait(30) and backend.describe()["verifies_drafts"] is False
    radio = chat.speculation_choices(backend)
    assert [value for _, value in radio.choices] == ["none"] and radio.value == "none"
    assert "llamacpp-f16 path decodes plainly" in radio.info


def test_stop_while_waiting_for_the_models_ends_the_question(engine, tmp_path):
    release = threading.Event()

    def loader(options):  # the models load only once the question has been stopped
        release.wait(10)
        return Copilot(LoadedEngine(engine, "/models/bigram", None), options, fixture_retriever())

    backend = Backend(CopilotOptions(), feedback=FeedbackStore(tmp_path / "f.db"), loader=loader)
    backend.start()
    steps = chat.respond(backend, "How do I rotate the glyph bank?", None, OPTIONS, None)
    next(steps)
    backend.stop_flag("default").set()
    *_, (messages, state) = steps
    release.set()
    assert state.exchanges[-1].note == "stopped" and "stopped" in messages[-1]["content"]


def test_thumbs_up_is_stored_with_question_answer_sources_stats_and_models(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    *_, (_, state) = chat.respond(backend, "How do I rotate the glyph bank?", None, OPTIONS, None)
    note, comment = chat.record_feedback(backend, state, "spot on", SimpleNamespace(index=2, liked=True), None)
    assert "saved" in note and comment == ""
    (vote,) = FeedbackStore(tmp_path / "feedback.db").all()
    assert vote["rating"] == "up" and vote["comment"] == "spot on" and vote["channel"] == "web"
    assert vote["question"] == "How do I rotate the glyph bank?" and CYCLE.strip()[:10] in vote["answer"]
    assert vote["sources"] and "text" not in vote["sources"][0] and vote["stats"]["new_tokens"] > 0
    assert vote["models"]["target"] == "/models/bigram"
    note, _ = chat.record_feedback(backend, ChatState(), "", SimpleNamespace(index=0, liked=False), None)
    assert "finished answers only" in note


def test_api_record_is_the_finished_answer(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    *_, (_, state) = chat.respond(backend, "How do I rotate the glyph bank?", None, OPTIONS, None)
    record = chat.api_record(state.exchanges[-1])
    assert record["done"] and record["finish_reason"] == "length" and record["sources"][0]["document"] == "glyphs.md"


def test_first_start_builds_the_runbook_index_once(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "retrieval"))
    from retrieval_fakes import FakeEmbedder

    from app.ingest_cmd import ensure_corpus_index

    report = ensure_corpus_index("runbooks", tmp_path / "index", embedder=FakeEmbedder())
    assert report is not None and report.chunks > 10
    assert ensure_corpus_index("runbooks", tmp_path / "index", embedder=FakeEmbedder()) is None


def test_login_comes_from_both_environment_variables_or_neither(monkeypatch):
    from app.chat_cmd import login_from_env
    from core.errors import SpecragError

    monkeypatch.delenv("SPECRAG_CHAT_USER", raising=False)
    monkeypatch.delenv("SPECRAG_CHAT_PASSWORD", raising=False)
    assert login_from_env() is None
    monkeypatch.setenv("SPECRAG_CHAT_USER", "ops")
    with pytest.raises(SpecragError, match="set both"):
        login_from_env()
    monkeypatch.setenv("SPECRAG_CHAT_PASSWORD", "s3cret")
    assert login_from_env() == ("ops", "s3cret")


def test_binding_beyond_localhost_warns_and_never_shares(monkeypatch, capsys, tmp_path):
    import app.web.layout as layout
    from app.chat_cmd import run
    from app.cli import build_parser

    launched = {}

    class FakeApp:
        def queue(self, **kwargs):
            launched["queue"] = kwargs

        def launch(self, **kwargs):
            launched.update(kwargs)

    monkeypatch.setattr(layout, "build_app", lambda *a, **k: FakeApp())
    monkeypatch.setattr(Backend, "start", lambda self: self)
    monkeypatch.delenv("SPECRAG_CHAT_USER", raising=False)
    monkeypatch.delenv("SPECRAG_CHAT_PASSWORD", raising=False)
    args = build_parser().parse_args(
        ["chat", "--host", "0.0.0.0", "--port", str(free_port()), "--feedback-db", str(tmp_path / "f.db")]
    )
    assert run(args) == 0
    assert "warning: binding 0.0.0.0 exposes the chat" in capsys.readouterr().err
    assert launched["server_name"] == "0.0.0.0" and launched["share"] is False and launched["auth"] is None
    assert build_parser().parse_args(["chat"]).host == "127.0.0.1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_port_in_use_or_out_of_range_is_refused_before_any_model_loads(monkeypatch, capsys, tmp_path):
    from app.chat_cmd import run
    from app.cli import build_parser
    from core.errors import SpecragError

    started = []
    monkeypatch.setattr(Backend, "start", lambda self: started.append(self) or self)
    monkeypatch.delenv("SPECRAG_CHAT_USER", raising=False)
    monkeypatch.delenv("SPECRAG_CHAT_PASSWORD", raising=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = build_parser().parse_args(["chat", "--port", str(port), "--feedback-db", str(tmp_path / "f.db")])
        with pytest.raises(SpecragError, match=f"cannot listen on 127.0.0.1:{port} .*pass --port with a free one"):
            run(args)
    assert started == []
    for bad in ("99999", "0", "http"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["chat", "--port", bad])
        assert "a port is a number from 1 to 65535" in capsys.readouterr().err


@pytest.mark.parametrize(
    "count, turns, reading",
    [
        (1, 1, "read 1 new passage · with 1 earlier turn"),
        (3, 2, "read 3 new passages · with 2 earlier turns"),
        (6, 0, "read 6 passages"),
        (1, 0, "read 1 passage"),
        (2, 1, "read 2 new passages · with 1 earlier turn · searched together with your previous question"),
        (2, 2, "read 2 new passages · with 2 earlier turns · searched together with your 2 previous questions"),
    ],
)
def test_the_reading_line_counts_passages_and_turns_in_words(count, turns, reading):
    from app.copilot import Status
    from app.web.session import Exchange

    exchange = Exchange("How do I drain a node?")
    searched_with = 0 if "searched" not in reading else 1 if reading.endswith("question") else 2
    detail = {"count": count, "history_turns": turns, "searched_with_previous": searched_with}
    exchange.apply(Status("passages", "reading", detail))
    assert exchange.reading == reading


def test_tokens_update_the_page_at_most_ten_times_a_second(monkeypatch):
    # every update re-renders the answer in the browser, which on a small machine takes CPU from the model
    clock = iter(i * 0.01 for i in range(10_000))  # a token every 10 ms
    monkeypatch.setattr(chat.time, "monotonic", lambda: next(clock))
    tokens = [Token(f"t{i} ", [i], ["target"], {}) for i in range(100)]
    state = ChatState()
    turn = Exchange("q")
    state.exchanges.append(turn)
    updates = list(chat._stream(iter(tokens), turn, state, threading.Event(), 0.0))
    assert 9 <= len(updates) <= 11  # one second of tokens
    assert turn.answer.startswith("t0 t1 ")  # every token is folded in, shown or not


def test_a_refused_question_can_be_answered_anyway_under_the_gates_warning(engine, tmp_path, monkeypatch):
    from app.copilot import gate

    monkeypatch.setitem(gate.THRESHOLDS, "fake-model", 0.5)  # the fake retriever's embedder, calibrated
    retriever = fixture_retriever()
    retriever.similarity = 0.3  # below it: refused
    backend = ready_backend(engine, tmp_path, retriever)
    options = chat.answer_options(0.0, 3, "hybrid", 48)
    *_, (messages, state) = chat.respond(backend, "How do I rotate the glyph bank?", None, options, None)
    assert state.exchanges[-1].final.gated and "do not cover" in answer_of(messages)
    assert chat.answer_anyway_button(state).interactive is True

    question = state.pop_last().question  # what the button's first step does, as retry's does
    warned = chat.answer_options(0.0, 3, "hybrid", 48, gate="warn")
    *_, (messages, state) = chat.respond(backend, question, state, warned, None)
    final = state.exchanges[-1].final
    assert len(state.exchanges) == 1 and not final.gated and final.stats["new_tokens"] > 0
    assert "may not cover this question" in messages[-1]["content"]  # answered, under the gate's warning
    assert chat.answer_anyway_button(state).interactive is False  # an answer, not a refusal: nothing to override

    *_, (_, state) = chat.respond(backend, "And the next one?", state, options, None)  # the command's gate again
    assert state.exchanges[-1].final.gated


def test_an_unknown_gate_mode_from_the_api_is_a_message_in_the_chat(engine, tmp_path):
    backend = ready_backend(engine, tmp_path, fixture_retriever())
    options = chat.answer_options(0.0, 3, "hybrid", 48, gate="maybe")
    *_, (messages, _) = chat.respond(backend, "How do I rotate the glyph bank?", None, options, None)
    error = messages[-1]["content"]
    assert "sr-error" in error and "unknown gate mode &#x27;maybe&#x27;; use one of off, warn, refuse" in error


def test_answer_anyway_is_off_without_a_refusal():
    assert chat.answer_anyway_button(None).interactive is False
    assert chat.answer_anyway_button(ChatState()).interactive is False
    assert "gate" not in chat.answer_options(0.0, 6, "none", 64)
