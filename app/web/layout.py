"""The page layout and event wiring of the chat (handlers live in chat.py).

Events: ask (textbox submit or the Ask button), retry and answer anyway run `respond` in the
shared "engine" concurrency slot (limit 1; gradio shows the queue position on the chat), as does
the API endpoint `/ask`; answer anyway asks the last question again with the relevance gate
only warning, and can be clicked only while the last answer is the gate's refusal; stop sets
the session's stop flag outside the queue, and can be clicked only while an answer of this page
runs (from its first output to its end); new conversation closes any running answer (gradio
`cancels`) and clears the state; thumbs up/down store a vote; a 1 s timer shows the loading
progress until the models are ready.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from app.copilot import AnswerOptions
from app.copilot.options import SPECULATION_MODES
from app.web import chat
from app.web.backend import Backend
from app.web.session import ChatState, Exchange

CSS = (Path(__file__).parent / "chat.css").read_text(encoding="utf-8")
PLACEHOLDER = (
    "**specrag** answers from your runbooks. Every answer lists its sources, marks what it copied "
    "verbatim from them, and flags commands it could not find there."
)
ENGINE = {"concurrency_limit": 1, "concurrency_id": "engine"}  # every answering event shares one slot


@dataclass
class Page:
    status: gr.HTML
    chatbot: gr.Chatbot
    question: gr.Textbox
    ask: gr.Button
    stop: gr.Button
    retry: gr.Button
    anyway: gr.Button
    new: gr.Button
    controls: list[gr.components.Component]
    comment: gr.Textbox
    feedback_note: gr.Markdown
    state: gr.State
    pending: gr.State  # the question being answered (the box is cleared at once)


def build_app(backend: Backend, defaults: AnswerOptions, event_delay: float = 0.0) -> gr.Blocks:
    with gr.Blocks(title="specrag chat", fill_height=True) as app:
        with gr.Row(equal_height=False):
            with gr.Column(scale=4):
                chat_column = _chat_column()
            with gr.Column(scale=1, min_width=260, elem_id="sr-side"):
                controls, comment, feedback_note = _side_column(defaults)
        page = Page(
            **chat_column,
            controls=controls,
            comment=comment,
            feedback_note=feedback_note,
            state=gr.State(ChatState()),
            pending=gr.State(""),
        )
        _wire_status(app, page, backend)
        running = _wire_answers(page, backend, event_delay)
        _wire_session(page, backend, running)
        _wire_api(backend, event_delay)
    return app


def _chat_column() -> dict[str, gr.components.Component]:
    gr.HTML('<div class="sr-title">specrag <span>operations copilot</span></div>')
    status = gr.HTML(elem_id="sr-status")
    chatbot = gr.Chatbot(
        elem_id="sr-chat",
        show_label=False,
        height="68vh",
        placeholder=PLACEHOLDER,
        feedback_options=("Like", "Dislike"),
        buttons=["copy"],
        layout="panel",
    )
    with gr.Row(elem_id="sr-input"):
        question = gr.Textbox(
            show_label=False,
            placeholder="Ask about a runbook, a command, an alarm…",
            scale=8,
            elem_id="sr-question",
            lines=1,
            max_lines=6,
            autofocus=True,
        )
        ask = gr.Button("Ask", variant="primary", scale=1, min_width=80, elem_id="sr-ask")
        # grey, and off while nothing runs: a live red Stop beside Ask read as an alarm
        stop = gr.Button("Stop", variant="secondary", scale=1, min_width=80, elem_id="sr-stop", interactive=False)
    with gr.Row():
        retry = gr.Button("Retry", size="sm", elem_id="sr-retry")
        # off until the gate refuses a question: then the operator, who sees the nearest sources listed, may
        # still want the model's reading of them, shown under the gate's warning
        anyway = gr.Button("Answer anyway", size="sm", elem_id="sr-anyway", interactive=False)
        new = gr.Button("New conversation", size="sm", elem_id="sr-new")
    return {
        "status": status,
        "chatbot": chatbot,
        "question": question,
        "ask": ask,
        "stop": stop,
        "retry": retry,
        "anyway": anyway,
        "new": new,
    }


SPECULATION_CONTROL = 2  # the speculation radio's place among the controls


def _side_column(defaults: AnswerOptions) -> tuple[list[gr.components.Component], gr.Textbox, gr.Markdown]:
    gr.HTML('<div class="sr-side-h">Answer settings</div>')
    controls = [
        gr.Slider(0.0, 1.5, value=defaults.temperature, step=0.05, label="Temperature (0 = greedy)", elem_id="sr-temp"),
        gr.Slider(1, 12, value=defaults.passages, step=1, label="Passages from the index", elem_id="sr-passages"),
        gr.Radio(
            list(SPECULATION_MODES),
            value=defaults.speculation,
            label="Speculation",
            elem_id="sr-spec",
            info="none: plain decoding · ngram: copy from the sources · model: draft model · hybrid: both",
        ),
        gr.Slider(16, 1024, value=defaults.max_new_tokens, step=16, label="Max answer tokens", elem_id="sr-max"),
    ]
    gr.HTML('<div class="sr-side-h">Feedback</div>')
    comment = gr.Textbox(label="Comment (optional, sent with your next thumbs up/down)", lines=2, elem_id="sr-comment")
    return controls, comment, gr.Markdown(elem_id="sr-feedback-note")


def _wire_status(app: gr.Blocks, page: Page, backend: Backend) -> None:
    timer = gr.Timer(1.0)

    def tick() -> tuple[str, gr.Timer, gr.Radio]:
        return *chat.banner(backend), chat.speculation_choices(backend)

    outputs = [page.status, timer, page.controls[SPECULATION_CONTROL]]
    app.load(tick, outputs=outputs, show_progress="hidden", queue=False)
    timer.tick(tick, outputs=outputs, show_progress="hidden", queue=False)


def _wire_answers(page: Page, backend: Backend, event_delay: float) -> list:
    """Ask, retry and answer anyway: show the question at once, then answer in the engine slot. Returns the
    answering events."""

    def answering(gate: str | None):
        def run(question_text, chat_state, temperature, passages, speculation, max_tokens, request: gr.Request):
            options = chat.answer_options(temperature, passages, speculation, max_tokens, gate)
            stop = gr.Button(interactive=True)  # sent once, with the first output; the rest leave it be
            for messages, state in chat.respond(backend, question_text, chat_state, options, request, event_delay):
                yield messages, state, stop
                stop = gr.skip()

        return run

    # each answer starts with "Answer anyway" off, so it never picks up the answer still running
    def echo(question_text: str, chat_state: ChatState):
        shown = [*chat_state.messages(), *Exchange(question_text or "").messages()]
        return "", question_text, shown, gr.Button(interactive=False)

    def pop_last(chat_state: ChatState):
        last = chat_state.pop_last()
        return last.question if last else "", chat_state.messages(), chat_state, gr.Button(interactive=False)

    inputs, outputs = [page.pending, page.state, *page.controls], [page.chatbot, page.state, page.stop]
    asking = gr.on(
        [page.question.submit, page.ask.click],
        echo,
        [page.question, page.state],
        [page.question, page.pending, page.chatbot, page.anyway],
        queue=False,
    )
    popped = [pop_last, [page.state], [page.pending, page.chatbot, page.state, page.anyway]]
    retrying, anyway = page.retry.click(*popped, queue=False), page.anyway.click(*popped, queue=False)
    run, warned = answering(None), answering("warn")
    events = [
        asking.then(run, inputs, outputs, api_name=False, show_progress="full", **ENGINE),
        retrying.then(run, inputs, outputs, api_name=False, show_progress="full", **ENGINE),
        anyway.then(warned, inputs, outputs, api_name=False, show_progress="full", **ENGINE),
    ]
    for event in events:  # runs after an answer ends, failed or not (a cancelled one: see new conversation)
        event.then(_stop_off, None, page.stop, queue=False).then(
            chat.answer_anyway_button, page.state, page.anyway, queue=False
        )
    return events


def _stop_off() -> gr.Button:
    return gr.Button(interactive=False)


def _wire_session(page: Page, backend: Backend, running: list) -> None:
    """Stop (outside the queue), new conversation (closes a running answer), and votes."""

    def request_stop(request: gr.Request) -> None:
        backend.stop_flag(chat.session_of(request)).set()

    def vote(chat_state, comment_text, data: gr.LikeData, request: gr.Request):
        return chat.record_feedback(backend, chat_state, comment_text, data, request)

    page.stop.click(request_stop, None, None, queue=False)
    page.new.click(
        lambda: (ChatState(), [], "", "", _stop_off(), gr.Button(interactive=False)),
        None,
        [page.state, page.chatbot, page.question, page.feedback_note, page.stop, page.anyway],
        cancels=running,
        queue=False,
    )
    page.chatbot.like(vote, [page.state, page.comment], [page.feedback_note, page.comment], queue=False)


def _wire_api(backend: Backend, event_delay: float) -> None:
    def ask(
        question: str,
        temperature: float = 0.0,
        passages: int = 6,
        speculation: str = "hybrid",
        max_new_tokens: int = 256,
        gate: str = "",
        request: gr.Request = None,
    ) -> Iterator[dict]:
        """Answer one question (no history), streaming {"answer"} and ending with the full record; `gate` (off,
        warn or refuse) overrides the server's relevance gate, as the page's "Answer anyway" does with warn."""
        options = chat.answer_options(temperature, passages, speculation, max_new_tokens, gate or None)
        for _, chat_state in chat.respond(backend, question, None, options, request, event_delay):
            yield chat.api_record(chat_state.exchanges[-1])

    gr.api(ask, api_name="ask", **ENGINE)
