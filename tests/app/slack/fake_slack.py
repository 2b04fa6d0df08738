"""A fake Slack on 127.0.0.1 for the bridge's tests: Web API over HTTP and Socket Mode over WebSocket.

- HTTP: POST /api/<method> (form or JSON, as slack_sdk sends them) is recorded as a
  `Call` and answered like Slack: auth.test, apps.connections.open (the WebSocket URL),
  chat.postMessage / update / postEphemeral, chat.startStream / appendStream /
  stopStream (building the streamed message from its markdown chunks),
  assistant.threads.setStatus and conversations.replies over the messages it holds.
  `fail(method, error)` and `rate_limit(method, retry_after)` inject errors.
- WebSocket: the bot's Socket Mode connection; `push_event` / `push_action` send
  envelopes and every ack the bot sends back is recorded.
Tests wait on conditions (`wait_for`) with timeouts, never on sleeps.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import serve

BOT_USER, BOT_ID, TEAM = "UBOT", "BBOT", "T0OPS"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    token: str
    at: float  # time.monotonic() when received
    status: int = 200


@dataclass
class Envelope:
    envelope_id: str
    body: dict
    sent_at: float
    acked_at: float | None = None


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    user: str
    thread_ts: str | None = None
    bot_id: str | None = None
    blocks: list = field(default_factory=list)
    streaming: bool = False

    def to_dict(self) -> dict:
        record = {"type": "message", "ts": self.ts, "text": self.text, "user": self.user, "blocks": self.blocks}
        if self.thread_ts:
            record["thread_ts"] = self.thread_ts
        if self.bot_id:
            record["bot_id"] = self.bot_id
        return record


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.sent: list[tuple[str, float]] = []  # (method, time) as sent by an instrumented client
        self.messages: dict[tuple[str, str], Message] = {}
        self.envelopes: dict[str, Envelope] = {}
        self._failures: dict[str, list] = {}
        self._clock = itertools.count(1)
        self._cond = threading.Condition()
        self._socket = None
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._http.daemon_threads = True
        self._ws = serve(self._ws_session, "127.0.0.1", 0, ping_interval=None)
        self._threads = [
            threading.Thread(target=self._http.serve_forever, daemon=True),
            threading.Thread(target=self._ws.serve_forever, daemon=True),
        ]

    # --- lifecycle and addresses ---

    def start(self) -> FakeSlack:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._ws.shutdown()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/api/"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self._ws.socket.getsockname()[1]}/link"

    # --- test controls ---

    def instrument(self, monkeypatch) -> None:
        """Record when the bot sends each Web API call (`sent`), before any network or scheduling delay.

        Patched on the class: bolt hands listeners a copy of the app's client.
        """
        from slack_sdk import WebClient

        original = WebClient.api_call

        def api_call(client, api_method, **kwargs):
            with self._cond:
                self.sent.append((api_method, time.monotonic()))
            return original(client, api_method, **kwargs)

        monkeypatch.setattr(WebClient, "api_call", api_call)

    def new_ts(self) -> str:
        return f"{1_700_000_000 + next(self._clock)}.000100"

    def fail(self, method: str, error: str, times: int = 1_000_000) -> None:
        self._failures[method] = [("error", error)] * times

    def rate_limit(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        self._failures[method] = [("ratelimited", retry_after)] * times

    def wait_for(self, predicate, timeout: float = 30.0, what: str = "a condition"):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = predicate()
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for {what}; calls: {self.summary()}")
                self._cond.wait(min(left, 0.5))

    def summary(self) -> list[str]:
        return [f"{c.method}({c.params.get('channel') or c.params.get('channel_id', '')})" for c in self.calls]

    def calls_to(self, method: str, ok_only: bool = True) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.method == method and (c.status == 200 or not ok_only)]

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        with self._cond:
            found = [m for m in self.messages.values() if m.channel == channel and thread_ts in (m.ts, m.thread_ts)]
        return sorted(found, key=lambda m: float(m.ts))

    def bot_replies(self, channel: str, thread_ts: str) -> list[Message]:
        return [m for m in self.thread(channel, thread_ts) if m.user == BOT_USER]

    # --- Socket Mode ---

    def wait_connected(self, timeout: float = 30.0) -> None:
        self.wait_for(lambda: self._socket is not None, timeout, "the Socket Mode connection")

    def push_event(
        self, event: dict, event_id: str | None = None, retry_attempt: int = 0, store: bool = True
    ) -> Envelope:
        """Deliver an Events API event (and keep it as a thread message, as Slack would)."""
        if store and event.get("ts") and event.get("type") in ("message", "app_mention"):
            self._store(
                Message(
                    event["channel"],
                    event["ts"],
                    event.get("text", ""),
                    event.get("user", ""),
                    event.get("thread_ts"),
                    event.get("bot_id"),
                )
            )
        body = {
            "token": "verification-token",
            "team_id": TEAM,
            "api_app_id": "A0SPECRAG",
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        extra = {"retry_attempt": retry_attempt, "retry_reason": "timeout" if retry_attempt else ""}
        return self._push("events_api", body, extra)

    def push_action(self, user: str, channel: str, message: Message, action: dict) -> Envelope:
        body = {
            "type": "block_actions",
            "user": {"id": user, "team_id": TEAM},
            "team": {"id": TEAM},
            "api_app_id": "A0SPECRAG",
            "channel": {"id": channel},
            "container": {
                "type": "message",
                "channel_id": channel,
                "message_ts": message.ts,
                "thread_ts": message.thread_ts,
            },
            "message": message.to_dict(),
            "trigger_id": "1.2.3",
            "actions": [action | {"type": "button", "block_id": "specrag_feedback", "action_ts": "1.1"}],
        }
        return self._push("interactive", body, {})

    def wait_acked(self, envelope: Envelope, timeout: float = 30.0) -> float:
        return self.wait_for(lambda: envelope.acked_at, timeout, f"the ack of {envelope.envelope_id}")

    def _push(self, kind: str, body: dict, extra: dict) -> Envelope:
        envelope = Envelope(str(uuid.uuid4()), body, time.monotonic())
        with self._cond:
            self.envelopes[envelope.envelope_id] = envelope
        frame = {"envelope_id": envelope.envelope_id, "type": kind, "accepts_response_payload": False, "payload": body}
        self._socket.send(json.dumps(frame | extra))
        return envelope

    def _ws_session(self, connection) -> None:
        connection.send(json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0"}}))
        with self._cond:
            self._socket = connection
            self._cond.notify_all()
        try:
            for raw in connection:
                self._ack(json.loads(raw))
        except ConnectionClosed:
            pass  # the bot closed its side

    def _ack(self, ack: dict) -> None:
        with self._cond:
            envelope = self.envelopes.get(ack.get("envelope_id"))
            if envelope is not None and envelope.acked_at is None:
                envelope.acked_at = time.monotonic()
            self._cond.notify_all()

    # --- Web API ---

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
                params = _parse(body, self.headers.get("Content-Type", ""))
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ") or params.get("token", "")
                status, headers, reply = fake._api(self.path.rsplit("/", 1)[-1], params, token)
                data = json.dumps(reply).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        return Handler

    def _api(self, method: str, params: dict, token: str) -> tuple[int, dict, dict]:
        with self._cond:
            call = Call(method, params, token, time.monotonic())
            self.calls.append(call)
            injected = self._failures.get(method)
            if injected:
                kind, value = injected.pop(0)
                if kind == "ratelimited":
                    call.status = 429
                    self._cond.notify_all()
                    return 429, {"Retry-After": str(value)}, {"ok": False, "error": "ratelimited"}
                self._cond.notify_all()
                return 200, {}, {"ok": False, "error": value}
            handler = getattr(self, "_" + method.replace(".", "_"), None)
            reply = handler(params) if handler else {}
            self._cond.notify_all()
            return 200, {}, {"ok": True} | reply

    def _store(self, message: Message) -> None:
        with self._cond:
            self.messages[(message.channel, message.ts)] = message
            self._cond.notify_all()

    def _auth_test(self, params: dict) -> dict:
        return {"user_id": BOT_USER, "bot_id": BOT_ID, "team_id": TEAM, "user": "specrag", "team": "ops"}

    def _apps_connections_open(self, params: dict) -> dict:
        return {"url": self.ws_url}

    def _chat_postMessage(self, params: dict) -> dict:
        message = Message(
            params["channel"],
            self.new_ts(),
            params.get("text", ""),
            BOT_USER,
            params.get("thread_ts"),
            BOT_ID,
            params.get("blocks") or [],
        )
        self.messages[(message.channel, message.ts)] = message
        return {"channel": message.channel, "ts": message.ts, "message": message.to_dict()}

    def _chat_update(self, params: dict) -> dict:
        message = self.messages[(params["channel"], params["ts"])]
        message.text, message.blocks = params.get("text", ""), params.get("blocks") or []
        return {"channel": message.channel, "ts": message.ts}

    def _chat_postEphemeral(self, params: dict) -> dict:
        return {"message_ts": self.new_ts()}

    def _chat_startStream(self, params: dict) -> dict:
        message = Message(
            params["channel"],
            self.new_ts(),
            _chunk_text(params),
            BOT_USER,
            params.get("thread_ts"),
            BOT_ID,
            streaming=True,
        )
        self.messages[(message.channel, message.ts)] = message
        return {"channel": message.channel, "ts": message.ts}

    def _chat_appendStream(self, params: dict) -> dict:
        message = self.messages[(params["channel"], params["ts"])]
        if not message.streaming:
            return {"ok": False, "error": "message_not_in_streaming_state"}
        message.text += _chunk_text(params)
        return {"channel": message.channel, "ts": message.ts}

    def _chat_stopStream(self, params: dict) -> dict:
        reply = self._chat_appendStream(params)
        message = self.messages[(params["channel"], params["ts"])]
        message.streaming, message.blocks = False, params.get("blocks") or []
        return reply

    def _conversations_replies(self, params: dict) -> dict:
        messages = [m.to_dict() for m in self.thread(params["channel"], params["ts"])]
        return {"messages": messages[: int(params.get("limit", 1000))], "has_more": False}


def _parse(body: str, content_type: str) -> dict:
    if "json" in content_type:
        return json.loads(body or "{}")
    params = {k: v[0] for k, v in parse_qs(body).items()}
    for name in ("blocks", "chunks"):
        if isinstance(params.get(name), str):
            params[name] = json.loads(params[name])
    return params


def _chunk_text(params: dict) -> str:
    text = params.get("markdown_text") or ""
    return text + "".join(c.get("text", "") for c in params.get("chunks") or [] if c.get("type") == "markdown_text")
