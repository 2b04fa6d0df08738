"""The page layout and event wiring of the chat (handlers live in chat.py).

Events: ask (textbox submit or the Ask button) and retry run `respond` in the shared
"engine" concurrency slot (limit 1, queue positions shown on the chat); stop sets the
session's stop flag outside the queue; new conversation closes any running answer
(gradio `cancels`) and clears the state; thumbs up/down store a vote.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gradio as gr

from app.copilot import AnswerOptions
from app.web import chat
from app.web.backend import Backend
from app.web.session import ChatState, Exchange
from generation.engine import SPECULATION_MODES

CSS = (Path(__file__).parent / "chat.css").read_text(encoding="utf-8")
PLACEHOLDER = (
    "**specrag** answers from your runbooks. Every answer lists its sources, marks what it copied "
    "verbatim from them, and flags commands it could not find there."
)


def build_app(backend: Backend, defaults: AnswerOptions, event_delay: float = 0.0) -> gr.Blocks:
    with gr.Blocks(title="specrag chat", fill_height=True) as app:
        state = gr.State(ChatState())
        retry_question, pending = gr.State(""), gr.State("")
        with gr.Row(equal_height=False):
            with gr.Column(scale=4):
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
                    stop = gr.Button("Stop", variant="stop", scale=1, min_width=80, elem_id="sr-stop")
                with gr.Row():
                    retry = gr.Button("Retry", size="sm", elem_id="sr-retry")
                    new = gr.Button("New conversation", size="sm", elem_id="sr-new")
            with gr.Column(scale=1, min_width=260, elem_id="sr-side"):
                controls = _controls(defaults)
                gr.HTML('<div class="sr-side-h">Feedback</div>')
                comment = gr.Textbox(
                    label="Comment (optional, sent with your next thumbs up/down)", lines=2, elem_id="sr-comment"
                )
                feedback_note = gr.Markdown(elem_id="sr-feedback-note")
        timer = gr.Timer(1.0)

        def tick() -> tuple[str, gr.Timer]:
            return chat.banner(backend)

        app.load(tick, outputs=[status, timer], show_progress="hidden", queue=False)
        timer.tick(tick, outputs=[status, timer], show_progress="hidden", queue=False)

        def run(question_text, chat_state, temperature, passages, speculation, max_tokens, request: gr.Request):
            options = chat.answer_options(temperature, passages, speculation, max_tokens)
            yield from chat.respond(backend, question_text, chat_state, options, request, event_delay)

        def echo(question_text: str, chat_state: ChatState):
            """Show the question at once (its answer may wait in the queue), keep it, clear the box."""
            waiting = Exchange(question_text or "")
            return "", question_text, [*chat_state.messages(), *waiting.messages()]

        answer_inputs = [state, *controls]
        answering = gr.on(
            [question.submit, ask.click], echo, [question, state], [question, pending, chatbot], queue=False
        ).then(
            run,
            [pending, *answer_inputs],
            [chatbot, state],
            concurrency_limit=1,
            concurrency_id="engine",
            api_name=False,
            show_progress="full",
        )

        def ask_api(
            question: str,
            temperature: float = 0.0,
            passages: int = 6,
            speculation: str = "hybrid",
            max_new_tokens: int = 256,
            request: gr.Request = None,
        ) -> Iterator[dict]:
            """Answer one question (no history), streaming {"answer"} and ending with the full record."""
            options = chat.answer_options(temperature, passages, speculation, max_new_tokens)
            for _, chat_state in chat.respond(backend, question, None, options, request, event_delay):
                yield chat.api_record(chat_state.exchanges[-1])

        gr.api(ask_api, api_name="ask", concurrency_limit=1, concurrency_id="engine")

        def pop_last(chat_state: ChatState):
            last = chat_state.pop_last()
            return chat_state, chat_state.messages(), last.question if last else ""

        retrying = retry.click(pop_last, [state], [state, chatbot, retry_question], queue=False).then(
            run,
            [retry_question, *answer_inputs],
            [chatbot, state],
            concurrency_limit=1,
            concurrency_id="engine",
            api_name=False,
        )

        def request_stop(request: gr.Request) -> None:
            backend.stop_flag(chat.session_of(request)).set()

        stop.click(request_stop, None, None, queue=False)
        new.click(
            lambda: (ChatState(), [], "", ""),
            None,
            [state, chatbot, question, feedback_note],
            cancels=[answering, retrying],
            queue=False,
        )

        def vote(chat_state, comment_text, data: gr.LikeData, request: gr.Request):
            return chat.record_feedback(backend, chat_state, comment_text, data, request)

        chatbot.like(vote, [state, comment], [feedback_note, comment], queue=False)
    return app


def _controls(defaults: AnswerOptions) -> list[gr.components.Component]:
    gr.HTML('<div class="sr-side-h">Answer settings</div>')
    return [
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
