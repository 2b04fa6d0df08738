"""The Slack bot: which events get answers, how an answer job runs, where feedback goes.

`SlackBridge` holds one Copilot, an AnswerQueue of N workers and the feedback store.
Bolt listeners (`build_app`) only filter, de-duplicate and queue, so every event is
acknowledged at once (bolt acks before running a listener when process_before_response
is False, the default). A job, on a worker thread, reads the thread's earlier messages
as history (conversations.replies), runs the pipeline, renders it (streaming.py) and
remembers the answer for the thumbs buttons. Any failure becomes a polite reply in the
thread; the worker then takes the next job.

Answered: app mentions in channels (optionally only `channels`) and direct messages,
in the thread of the asking message. Ignored: the bot's own messages, other bots,
edits, deletions, joins and other message subtypes.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from slack_bolt import App
from slack_sdk.errors import SlackApiError

from app.copilot import AnswerOptions, Copilot, Final, Turn
from app.copilot.pipeline import SEARCHING
from app.feedback import FeedbackStore, Vote
from app.slack import render
from app.slack.history import BotIdentity, clean_question, thread_turns
from app.slack.queue import AnswerQueue, Deduper
from app.slack.streaming import SlackThread, StreamSettings, render_answer, set_status
from core.errors import SpecragError

log = logging.getLogger(__name__)

ANSWERED_SUBTYPES = (None, "file_share", "thread_broadcast")  # a person's message, possibly with a file
REMEMBERED_ANSWERS = 2000  # answers kept in memory for their feedback buttons


@dataclass(frozen=True)
class BridgeSettings:
    channels: frozenset[str] = frozenset()  # channel ids to answer in; empty: every channel the bot is in
    concurrency: int = 1  # answers in progress at once
    stream: StreamSettings = field(default_factory=StreamSettings)
    answer: AnswerOptions | None = None  # None: the copilot's defaults
    history_messages: int = 200  # earlier thread messages read as history (one conversations.replies page)


@dataclass(frozen=True)
class Job:
    thread: SlackThread
    question: str
    ts: str  # the asking message
    follow_up: bool  # asked inside an existing thread: its earlier messages are history
    bot: BotIdentity
    gate: str | None = None  # the relevance gate for this answer; None: the bridge's (an "Answer anyway" sets warn)


class SlackBridge:
    def __init__(self, copilot: Copilot, settings: BridgeSettings, feedback: FeedbackStore | None = None) -> None:
        self.copilot, self.settings = copilot, settings
        self.feedback = feedback if feedback is not None else FeedbackStore()
        self.dedup = Deduper()
        self.answers: OrderedDict[str, dict[str, Any]] = OrderedDict()  # key -> what a vote on it stores
        self.refused: OrderedDict[str, Job] = OrderedDict()  # key -> the job the gate refused, for "Answer anyway"
        self._answers_lock = threading.Lock()
        self.events_handled = 0
        self.queue = AnswerQueue(settings.concurrency, self.run)

    # --- listener side: fast, never answers itself ---

    def on_event(self, body: dict, event: dict, client: Any, context: Any) -> None:
        try:
            job = self.accept(body, event, client, context)
            if job is not None:
                self.submit(job)
        finally:
            with self._answers_lock:
                self.events_handled += 1  # events seen by a listener, answered or not (tests wait on it)

    def accept(self, body: dict, event: dict, client: Any, context: Any) -> Job | None:
        """The job for an event that deserves an answer, else None (see the module docstring)."""
        bot = BotIdentity(context.get("bot_user_id") or "", context.get("bot_id") or "")
        channel, ts, user = event.get("channel", ""), event.get("ts", ""), event.get("user", "")
        if event.get("type") == "message" and event.get("channel_type") != "im":
            return None  # channel messages are answered through their app_mention event
        if event.get("subtype") not in ANSWERED_SUBTYPES or event.get("bot_id") or not user or user == bot.user_id:
            return None
        direct = event.get("channel_type") == "im" or channel.startswith("D")
        if self.settings.channels and not direct and channel not in self.settings.channels:
            return None
        keys = (("event", body.get("event_id")), ("message", channel, ts))
        if not self.dedup.first_time(*keys, ("client_msg", event.get("client_msg_id"))):
            log.info("ignoring a repeated delivery of message %s in %s", ts, channel)
            return None
        thread_ts = event.get("thread_ts") or ts
        thread = SlackThread(client, channel, thread_ts, user, context.get("team_id") or event.get("team") or "")
        question = clean_question(event.get("text") or "", bot)
        return Job(thread, question, ts, follow_up=thread_ts != ts, bot=bot)

    def submit(self, job: Job) -> None:
        """Queue a job; one that has to wait is told its place in its thread."""
        place = self.queue.submit(job)
        if place:
            post(job.thread, render.queue_notice(place))

    # --- worker side ---

    def run(self, job: Job) -> None:
        """Answer one job in its thread; any failure is reported there and the worker goes on."""
        key = f"{job.thread.channel}:{job.ts}"
        try:
            set_status(job.thread, SEARCHING)
            history = self.history(job) if job.follow_up else []
            options = self.settings.answer
            if job.gate:
                options = replace(options or self.copilot.options.answer, gate=job.gate)
            events = self.copilot.answer(job.question, history=history, options=options)
            try:
                render_answer(events, job.thread, self.settings.stream, key, lambda f: self.remember(key, job, f))
            finally:
                close = getattr(events, "close", None)
                if close is not None:
                    close()  # frees the engine at once if rendering failed
        except SpecragError as err:
            self.report(job.thread, str(err))
        except Exception:
            log.exception("answering message %s in %s failed", job.ts, job.thread.channel)
            self.report(job.thread, "something went wrong on my side (it is logged). Please ask again.")

    def history(self, job: Job) -> list[Turn]:
        """The thread's earlier exchanges; without them (e.g. a missing history scope) the question stands alone."""
        t = job.thread
        try:
            response = t.client.conversations_replies(
                channel=t.channel, ts=t.thread_ts, limit=self.settings.history_messages
            )
        except SlackApiError as err:
            log.warning("cannot read the thread %s/%s: %s", t.channel, t.thread_ts, err.response.get("error"))
            return []
        return thread_turns(response.get("messages", []), job.bot, before_ts=job.ts)

    def report(self, thread: SlackThread, reason: str) -> None:
        set_status(thread, "")
        try:
            post(thread, render.error_text(reason))
        except Exception:
            log.exception("could not report a failure in %s", thread.channel)

    def remember(self, key: str, job: Job, final: Final) -> None:
        record = {
            "question": final.question,
            "answer": final.shown,  # what the thread showed, as the chat stores
            "sources": final.sources,
            "stats": final.stats,
            "models": final.models,
            "thread": f"{job.thread.channel}/{job.thread.thread_ts}",
        }
        with self._answers_lock:
            self.answers[key] = record
            if final.gated:
                self.refused[key] = job
            for remembered in (self.answers, self.refused):
                while len(remembered) > REMEMBERED_ANSWERS:
                    remembered.popitem(last=False)

    # --- feedback buttons ---

    def on_feedback(self, body: dict, action: dict, client: Any) -> None:
        rating = action["action_id"].rsplit("_", 1)[-1]
        user = body.get("user", {}).get("id", "")
        with self._answers_lock:
            record = self.answers.get(action.get("value", ""))
        if record is None:
            text = "I no longer have that answer (I was restarted since), so the vote was not stored."
        else:
            try:
                self.feedback.record(Vote(rating=rating, **record, channel="slack", user=user))
                text = "Thanks, your feedback is stored." if rating == "up" else "Thanks, noted: this answer missed."
            except SpecragError as err:
                log.error("feedback not stored: %s", err)
                text = "Sorry, I could not store that vote."
        reply_privately(client, body, text, "confirm a vote")

    def on_anyway(self, body: dict, action: dict, client: Any) -> None:
        """Ask a question the gate refused again, in its thread, with the gate only warning; once per refusal."""
        with self._answers_lock:
            job = self.refused.pop(action.get("value", ""), None)
        if job is not None:
            user = body.get("user", {}).get("id", "")
            note = f"<@{user}> asked for an answer anyway: it follows in this thread, under a warning."
            take_button_off(client, body, note if user else "Answered anyway: see below, under a warning.")
            self.submit(replace(job, gate="warn"))
            return
        text = "That question is already being answered, or I no longer have it (I was restarted since): ask it again."
        reply_privately(client, body, text, "answer an Answer anyway click")

    def close(self) -> None:
        self.queue.close(timeout=5)


def post(thread: SlackThread, text: str) -> None:
    thread.client.chat_postMessage(channel=thread.channel, thread_ts=thread.thread_ts, text=text)


def clicked_channel(body: dict) -> str:
    """The channel of a clicked message: the payload's channel, else its message container's."""
    return body.get("channel", {}).get("id", "") or body.get("container", {}).get("channel_id", "")


def reply_privately(client: Any, body: dict, text: str, what: str) -> None:
    """Answer a button click with a message only its clicker sees, in the clicked message's thread."""
    user = body.get("user", {}).get("id", "")
    thread_ts = body.get("message", {}).get("thread_ts") or body.get("container", {}).get("thread_ts")
    try:
        client.chat_postEphemeral(channel=clicked_channel(body), user=user, thread_ts=thread_ts, text=text)
    except SlackApiError as err:
        log.warning("could not %s: %s", what, err.response.get("error"))


def take_button_off(client: Any, body: dict, note: str) -> None:
    """Drop "Answer anyway" from the clicked refusal (render.anyway_taken); its words and thumbs stay as they are."""
    message = body.get("message") or {}
    ts = body.get("container", {}).get("message_ts") or message.get("ts", "")
    blocks = render.anyway_taken(message.get("blocks") or [], message.get("text", ""), note)
    try:
        client.chat_update(channel=clicked_channel(body), ts=ts, text=message.get("text", ""), blocks=blocks)
    except SlackApiError as err:
        log.warning("could not take the Answer anyway button off: %s", err.response.get("error"))


def build_app(bridge: SlackBridge, client: Any, http: bool = False, signing_secret: str | None = None) -> App:
    """A bolt App wired to the bridge; `http` turns request signature checks on (Events API over HTTP)."""
    _quiet_token_warning()
    app = App(
        client=client,  # carries the bot token
        signing_secret=signing_secret or "",
        request_verification_enabled=http,
        process_before_response=False,  # ack first, then run the listener on bolt's executor
    )

    @app.event("app_mention")
    def on_mention(body, event, client, context):
        bridge.on_event(body, event, client, context)

    @app.event("message")
    def on_message(body, event, client, context):
        bridge.on_event(body, event, client, context)

    @app.action(re.compile(rf"^{render.FEEDBACK_ACTION}_(up|down)$"))
    def on_feedback(ack, body, action, client):
        ack()
        bridge.on_feedback(body, action, client)

    @app.action(render.ANYWAY_ACTION)
    def on_anyway(ack, body, action, client):
        ack()
        bridge.on_anyway(body, action, client)

    return app


class _SkipMessage(logging.Filter):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.message


def _quiet_token_warning() -> None:
    """bolt warns that SLACK_BOT_TOKEN goes unused when given a client; the client carries that very token."""
    from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

    bolt_log = logging.getLogger("slack_bolt.App")
    if not any(isinstance(f, _SkipMessage) for f in bolt_log.filters):
        bolt_log.addFilter(_SkipMessage(warning_client_prioritized_and_token_skipped()))
