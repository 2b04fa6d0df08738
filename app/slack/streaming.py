"""Render one answer's event stream into its Slack thread.

Statuses go to `assistant.threads.setStatus` (the "searching the sources…" line under
the thread) while retrieval and prefill run. Tokens go to Slack's native stream
(chat.startStream / appendStream / stopStream through slack_sdk's `chat_stream`
helper, Markdown text), appended at most every `stream_interval` seconds. Where the
stream is unavailable (an API error on any stream call: unknown method, missing scope,
stream closed) the answer continues in a placeholder message posted with
chat.postMessage and rewritten with chat.update at most every `update_interval`
seconds, as mrkdwn. Either way the answer ends with the footer (sources, warnings,
stats) and the feedback buttons, and text past `message_limit` continues in further
messages of the thread. The pipeline runs in a thread of its own (core.background), so
decoding goes on while a Slack call is on its way.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError

from app.copilot import Event, Final, Status, Token
from app.slack import render
from core.background import in_background

log = logging.getLogger(__name__)

INTERRUPTED = "_(answer interrupted)_"


@dataclass(frozen=True)
class SlackThread:
    """Where an answer goes: the thread of the asking message, and who asked."""

    client: Any  # slack_sdk.WebClient
    channel: str
    thread_ts: str
    user: str = ""
    team: str = ""


@dataclass(frozen=True)
class StreamSettings:
    native: bool = True  # try Slack's streaming API first
    stream_interval: float = 0.5  # seconds between appends to a native stream
    update_interval: float = 1.0  # seconds between chat.update calls of the placeholder
    message_limit: int = render.MESSAGE_LIMIT


class Throttle:
    """`ready()` is True at most once per `interval` seconds (the first call always)."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval, self.clock, self.last = interval, clock, None

    def ready(self) -> bool:
        now = self.clock()
        if self.last is not None and now - self.last < self.interval:
            return False
        self.last = now
        return True


def set_status(thread: SlackThread, status: str) -> None:
    """Show (or clear, with "") the thread's status line; cosmetic, so a failure is only logged."""
    try:
        thread.client.assistant_threads_setStatus(channel_id=thread.channel, thread_ts=thread.thread_ts, status=status)
    except SlackApiError as err:
        log.debug("assistant.threads.setStatus failed: %s", err.response.get("error"))


def render_answer(
    events: Iterator[Event],
    thread: SlackThread,
    settings: StreamSettings,
    answer_key: str,
    on_final: Callable[[Final], None] | None = None,
) -> Final:
    """Drain the pipeline's events into the thread; returns the Final.

    The events are made in a thread of their own: every Slack call here is a network round trip,
    and made between two target passes it held decoding up for as long. Whatever ends this (the
    answer, an error) has the pipeline closed before it returns, which frees the engine.
    `on_final` runs before the footer and its buttons are shown, so a click can never
    arrive before the answer it votes on is known.
    """
    writer, final = None, None
    try:
        with contextlib.closing(in_background(events, "specrag-slack-answer")) as made:
            for event in made:
                if isinstance(event, Status):
                    set_status(thread, event.message)
                elif isinstance(event, Token):
                    writer = writer or AnswerWriter(thread, settings)
                    writer.write(event.text)
                elif isinstance(event, Final):
                    final = event
        if final is None:
            raise RuntimeError("the answer stream ended without a final event")
        if on_final is not None:
            on_final(final)
        (writer or AnswerWriter(thread, settings)).finish(final, answer_key)
    except Exception:
        if writer is not None:
            writer.abort()
        raise
    return final


class AnswerWriter:
    """One answer's messages: natively streamed, switching to a placeholder on the first stream error."""

    def __init__(self, thread: SlackThread, settings: StreamSettings) -> None:
        self.thread, self.settings = thread, settings
        self.native: NativeStream | None = NativeStream(thread, settings) if settings.native else None
        self.placeholder: Placeholder | None = None if self.native else Placeholder(thread, settings)

    def write(self, delta: str) -> None:
        if self.native is not None:
            try:
                return self.native.write(delta)
            except SlackApiError as err:
                self._fall_back(err)
        self.placeholder.write(delta)

    def finish(self, final: Final, answer_key: str) -> None:
        if self.native is not None:
            try:
                if final.shown == final.answer:
                    return self.native.finish(final, answer_key)
                # a withheld or collapsed answer's streamed words are overwritten: end the stream, update its messages
                self.native.end()
                native, self.native = self.native, None
                self.placeholder = Placeholder(self.thread, self.settings, native.markdown, native.message_ts)
            except SlackApiError as err:
                self._fall_back(err)
        self.placeholder.finish(final, answer_key)

    def abort(self) -> None:
        """Close the half-written answer (best effort: the caller reports the failure)."""
        try:
            if self.native is not None:
                self.native.abort()
            elif self.placeholder is not None:
                self.placeholder.abort()
        except Exception as err:
            log.warning("could not close an interrupted answer: %s", err)

    def _fall_back(self, err: SlackApiError) -> None:
        log.warning(
            "Slack streaming unavailable (%s); updating a placeholder message instead", err.response.get("error")
        )
        native, self.native = self.native, None
        self.placeholder = Placeholder(self.thread, self.settings, native.markdown, native.message_ts)


class NativeStream:
    def __init__(self, thread: SlackThread, settings: StreamSettings) -> None:
        self.thread, self.settings = thread, settings
        self.markdown = ""  # the answer so far, unescaped
        self.message_ts: list[str] = []  # streamed messages of this answer
        self._stream: Any = None
        self._sent = 0  # characters streamed into the current message
        self._pending = ""  # escaped text not yet appended
        self._fences = 0  # code fences streamed into the current message
        self._throttle = Throttle(settings.stream_interval)

    def write(self, delta: str) -> None:
        self.markdown += delta
        self._pending += render.escape(delta)
        if self._pending and self._throttle.ready():
            self._flush()

    def finish(self, final: Final, answer_key: str) -> None:
        self._flush()
        stream = self._current()
        stream.stop(
            markdown_text="\n\n" + render.footer(final, markdown=True),
            blocks=render.feedback_blocks(answer_key, final.gated),
        )

    def abort(self) -> None:
        self._flush()
        self._current().stop(markdown_text=f"\n\n{INTERRUPTED}")

    def end(self) -> None:
        """Stop the open stream without sending what is pending (the messages are rewritten next)."""
        if self._stream is not None:
            self._stream.stop()
            self._stream = None

    def _current(self) -> Any:
        if self._stream is None:
            t = self.thread
            self._stream = t.client.chat_stream(
                channel=t.channel,
                thread_ts=t.thread_ts,
                recipient_user_id=t.user or None,
                recipient_team_id=t.team or None,
                buffer_size=1,  # this class decides when to send
            )
            self._sent = self._fences = 0
        return self._stream

    def _flush(self) -> None:
        """Append the pending text, continuing in a new message past the limit."""
        while self._pending:
            room = self.settings.message_limit - self._sent
            if len(self._pending) <= room:
                self._append(self._pending)
                self._pending = ""
                return
            cut = render.cut_point(self._pending, room - 4) if room > 8 else 0  # room for a closing fence
            if cut:
                self._append(self._pending[:cut])
            reopen = self._fences % 2 == 1  # the message ends inside a code block: close it, reopen next
            self._current().stop(markdown_text="\n```" if reopen else None)
            # the next message starts empty: without resetting _sent the next round found no room
            # and started a stream only to stop it, leaving an empty message in the thread
            self._stream, self._fences, self._sent = None, 0, 0
            self._pending = ("```\n" if reopen else "") + self._pending[cut:].lstrip("\n")

    def _append(self, text: str) -> None:
        stream = self._current()
        stream.append(markdown_text=text)
        if stream.ts and stream.ts not in self.message_ts:
            self.message_ts.append(stream.ts)
        self._sent += len(text)
        self._fences += text.count("```")


class Placeholder:
    """A posted message rewritten with chat.update at most every `update_interval` seconds."""

    def __init__(
        self, thread: SlackThread, settings: StreamSettings, markdown: str = "", message_ts: list[str] | None = None
    ) -> None:
        self.thread, self.settings = thread, settings
        self.markdown = markdown
        self.message_ts = list(message_ts or [])
        self._shown: dict[str, str] = {}
        self._throttle = Throttle(settings.update_interval)
        if not self.message_ts:
            self.message_ts.append(self._post("_writing the answer…_"))
        self._throttle.ready()  # the placeholder itself counts as the first update

    def write(self, delta: str) -> None:
        self.markdown += delta
        if self.markdown.strip() and self._throttle.ready():
            self._show(render.split_message(render.to_mrkdwn(self.markdown), self.settings.message_limit))

    def finish(self, final: Final, answer_key: str) -> None:
        text = render.to_mrkdwn(final.shown).strip()  # replaces the streamed words of a withheld or looping answer
        pieces = render.split_message(f"{text}\n\n{render.footer(final)}".strip(), self.settings.message_limit)
        self._show(pieces, answer_key, final.gated)
        if final.shown != final.answer:  # messages the longer streamed answer filled and the shown one does not
            rest = render.WITHHELD_REST if final.withheld else render.REPEATS_REST
            for ts in self.message_ts[len(pieces) :]:
                self.thread.client.chat_update(channel=self.thread.channel, ts=ts, text=rest)

    def abort(self) -> None:
        text = f"{render.to_mrkdwn(self.markdown).strip()}\n\n{INTERRUPTED}"
        self._show(render.split_message(text, self.settings.message_limit))

    def _show(self, pieces: list[str], answer_key: str | None = None, refused: bool = False) -> None:
        for i, piece in enumerate(pieces):
            key = answer_key if i == len(pieces) - 1 else None
            blocks = render.message_blocks(piece, key, refused)
            if i == len(self.message_ts):
                self.message_ts.append(self._post(piece, blocks))
            elif self._shown.get(self.message_ts[i]) != piece or key:
                ts = self.message_ts[i]
                self.thread.client.chat_update(channel=self.thread.channel, ts=ts, text=piece, blocks=blocks)
                self._shown[ts] = piece

    def _post(self, text: str, blocks: list[dict] | None = None) -> str:
        t = self.thread
        response = t.client.chat_postMessage(channel=t.channel, thread_ts=t.thread_ts, text=text, blocks=blocks)
        self._shown[response["ts"]] = text
        return response["ts"]
