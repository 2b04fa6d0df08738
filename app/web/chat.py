"""The gradio page: a chat over the copilot pipeline, its controls, feedback and queue.

Contract:
- `build_app(backend, defaults)` returns a gr.Blocks; `launch(app, ...)` serves it with the
  queue on: the answer events share one concurrency slot ("engine"), so one answer runs at
  a time and the others wait, shown their queue position by gradio.
- `respond` is the one answering handler (UI and API `/ask`): it streams the pipeline's
  events into the session's ChatState and always closes the pipeline stream when it ends,
  is stopped (stop flag, checked after every event, i.e. every target pass) or is closed by
  gradio (new conversation, disconnect), which frees the engine at once.
- Every SpecragError (empty or over-budget question, missing index, failed model load)
  becomes a message in the chat; the server keeps serving.
"""

from __future__ import annotations

import html
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from threading import Event as StopFlag
from typing import Any

import gradio as gr

from app.copilot import Event, Token
from app.feedback import Vote
from app.web.backend import Backend
from app.web.session import ChatState, Exchange
from core.errors import SpecragError

# At most 10 page updates a second while tokens stream. Every update re-renders the answer in the browser, and a
# browser on the same 2-core machine takes that CPU from llama.cpp's two threads: one 256-token answer decoded at
# 18.3 tok/s with 20 updates a second, 19.8 with 10, 21.6 with 1, against 24.7 in `specrag ask` (session 51).
YIELD_EVERY_S = 0.1
Outputs = tuple[list[dict[str, Any]], ChatState]


def session_of(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "default"


def respond(
    backend: Backend,
    question: str,
    state: ChatState | None,
    options: dict[str, Any],
    request: gr.Request | None,
    event_delay: float = 0.0,
) -> Iterator[Outputs]:
    state = state if isinstance(state, ChatState) else ChatState()
    history = state.history()
    turn = Exchange(question or "")
    state.exchanges.append(turn)
    stop = backend.stop_flag(session_of(request))
    stop.clear()
    yield state.messages(), state
    stream = None
    try:
        yield from _wait_for_models(backend, turn, state, stop)
        if stop.is_set():
            turn.stopped()
        else:
            answer_options = replace(backend.options.answer, **options)  # the command's flags for the rest
            stream = backend.copilot().answer(question or "", history, answer_options)
            yield from _stream(stream, turn, state, stop, event_delay)
    except SpecragError as err:
        turn.fail(str(err))
    except Exception as err:  # never take the server down; say what happened
        traceback.print_exc(file=sys.stderr)
        turn.fail(f"internal error: {type(err).__name__}: {err}")
    finally:
        if stream is not None:
            stream.close()  # releases the engine lock at once (stop, error, or gradio closing us)
    turn.close("answered")
    yield state.messages(), state


def _stream(
    stream: Iterator[Event], turn: Exchange, state: ChatState, stop: StopFlag, event_delay: float
) -> Iterator[Outputs]:
    """Fold the pipeline's events into the exchange; end at the first event after a stop request."""
    last = 0.0
    for event in stream:
        turn.apply(event)
        if stop.is_set():
            turn.stopped()
            return
        if not isinstance(event, Token) or time.monotonic() - last >= YIELD_EVERY_S:
            last = time.monotonic()
            yield state.messages(), state
        if event_delay and isinstance(event, Token):
            time.sleep(event_delay)  # hidden test flag: a slow model


def _wait_for_models(backend: Backend, turn: Exchange, state: ChatState, stop: StopFlag) -> Iterator[Outputs]:
    while not backend.wait(0.5) and not stop.is_set():
        load = backend.state()
        turn.title = f"waiting for the models to load ({load.elapsed_s:.0f} s): {load.message}"
        yield state.messages(), state


def answer_options(
    temperature: float, passages: float, speculation: str, max_tokens: float, gate: str | None = None
) -> dict[str, Any]:
    """The page's answer settings; `gate` overrides the command's relevance gate for this answer."""
    options = {
        "temperature": float(temperature),
        "passages": int(passages),
        "speculation": speculation,
        "max_new_tokens": int(max_tokens),
    }
    return options | {"gate": gate} if gate else options


def answer_anyway_button(state: ChatState | None) -> gr.Button:
    """The "Answer anyway" button, live only while the last answer is the relevance gate's refusal."""
    last = state.exchanges[-1] if isinstance(state, ChatState) and state.exchanges else None
    return gr.Button(interactive=bool(last and last.final is not None and last.final.gated))


def banner(backend: Backend) -> tuple[str, gr.Timer]:
    """The status line above the chat, and whether its 1 s timer keeps ticking."""
    load = backend.state()
    if load.phase == "loading":
        text = (
            f'<div class="sr-banner sr-loading"><span class="sr-spinner"></span> <b>Starting</b> · '
            f"{html.escape(load.message)} · {load.elapsed_s:.0f} s. You can ask now: questions wait for the models."
            "</div>"
        )
        return text, gr.Timer(active=True)
    if load.phase == "failed":
        text = f'<div class="sr-banner sr-failed">⚠ <b>The models failed to load</b>: {html.escape(load.message)}</div>'
        return text, gr.Timer(active=False)
    models = backend.describe()
    text = (
        f'<div class="sr-banner sr-ready">● <b>Ready</b> · target {_model_name(models.get("target"))} · draft '
        f"{_model_name(models.get('draft'))} · path {html.escape(str(models.get('quant', 'none')))} · "
        f"loaded in {load.elapsed_s:.0f} s</div>"
    )
    return text, gr.Timer(active=False)


def speculation_choices(backend: Backend) -> gr.Radio:
    """The speculation radio once the models are loaded: only "none" on a path that cannot verify drafts
    (llamacpp-f16), so nobody picks a mode that would silently decode plainly."""
    models = backend.describe()
    if models.get("verifies_drafts", True):
        return gr.skip()
    return gr.Radio(
        choices=["none"],
        value="none",
        info=f"The {models.get('quant')} path decodes plainly: its logits depend on how many tokens share a "
        "pass, so it cannot check drafts exactly.",
    )


def _model_name(path: str | None) -> str:
    """A model folder's name, its full path on hover."""
    if not path:
        return "<code>none</code>"
    return f'<code title="{html.escape(path)}">{html.escape(Path(path).name or path)}</code>'


def record_feedback(
    backend: Backend, state: ChatState | None, comment: str, data: gr.LikeData, request: gr.Request | None
) -> tuple[str, str]:
    index = data.index[0] if isinstance(data.index, (list, tuple)) else data.index
    exchange = state.exchange_at(int(index)) if isinstance(state, ChatState) else None
    if exchange is None or exchange.final is None:
        return "Feedback is for finished answers only.", comment
    final = exchange.final
    vote = Vote(
        rating="up" if data.liked is True or data.liked == "Like" else "down",
        question=final.question,
        answer=final.answer,
        sources=[{k: v for k, v in s.items() if k != "text"} for s in final.sources],
        stats=final.stats,
        models=final.models,
        comment=(comment or "").strip(),
        channel="web",
        user=getattr(request, "username", None) or "",
        thread=session_of(request),
    )
    try:
        vote_id = backend.record_vote(vote)
    except SpecragError as err:
        return f"⚠ {err}", comment
    return f"Thanks: feedback #{vote_id} saved ({vote.rating}).", ""


def api_record(exchange: Exchange) -> dict[str, Any]:
    """What the API returns for an exchange: the answer so far, or the finished record."""
    record: dict[str, Any] = {"question": exchange.question, "answer": exchange.answer, "done": False}
    if exchange.error:
        record |= {"done": True, "error": exchange.error}
    elif exchange.final is not None:
        final = exchange.final
        # "path" renamed: gradio_client takes any dict with a "path" for a file to download
        sources = [{("document" if k == "path" else k): v for k, v in s.items() if k != "text"} for s in final.sources]
        record |= {"done": True, "finish_reason": final.finish_reason, "sources": sources, "stats": final.stats}
    elif exchange.note:
        record |= {"done": True, "finish_reason": exchange.note}
    return record
