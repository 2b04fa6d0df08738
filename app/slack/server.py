"""Connections to Slack: the Web API client, Socket Mode, the HTTP Events API server, secret redaction.

- The WebClient retries HTTP 429 after the Retry-After it names
  (slack_sdk's RateLimitErrorRetryHandler) and connection errors (its default handler).
- Socket Mode (default) uses bolt's built-in SocketModeHandler: an outbound WebSocket
  opened with the app-level token (apps.connections.open), no public URL.
- HTTP mode serves POST `path` with a threading HTTP server; bolt's RequestVerification
  checks each request's signature and timestamp against the signing secret and answers
  401 to a bad or stale one (slack_sdk SignatureVerifier: more than 5 minutes off).
- Tokens come from the environment only; `RedactSecrets` keeps their values out of logs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from slack_bolt import App, BoltRequest
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


def make_client(token: str, base_url: str | None = None, rate_limit_retries: int = 3) -> WebClient:
    client = WebClient(token=token, base_url=base_url or WebClient.BASE_URL)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=rate_limit_retries))
    return client


def socket_mode_handler(app: App, app_token: str) -> object:
    """bolt's Socket Mode handler; `.connect()` runs it in the background, `.start()` blocks, `.close()` ends it."""
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    return SocketModeHandler(app, app_token=app_token, web_client=app.client)


def http_server(app: App, host: str, port: int, path: str = EVENTS_PATH) -> ThreadingHTTPServer:
    """A server (not yet serving) that hands POST `path` to the bolt app; port 0 picks a free one."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != path:
                self._reply(404, b"not found", "text/plain")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
            headers = {name.lower(): value for name, value in self.headers.items()}
            response = app.dispatch(BoltRequest(body=body, headers=headers, query=self.path.partition("?")[2]))
            content_type = response.headers.get("content-type", ["text/plain;charset=utf-8"])[0]
            self._reply(response.status, (response.body or "").encode("utf-8"), content_type)

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("http: " + format, *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve_in_background(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="specrag-slack-http", daemon=True)
    thread.start()
    return thread


class RedactSecrets(logging.Filter):
    """Replace secret values (tokens, signing secret) in log records by "[redacted]"."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= 8]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(secret in message for secret in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, "[redacted]")
            record.msg, record.args = message, ()
        return True


def redact_logs(secrets: Iterable[str]) -> RedactSecrets:
    """Install the redaction filter on every handler of the root logger."""
    redactor = RedactSecrets(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redactor)
    return redactor
