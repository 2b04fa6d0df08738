"""`specrag slack`: run the Slack bot on the copilot pipeline (Socket Mode by default).

Tokens come from the environment only (SLACK_BOT_TOKEN, SLACK_APP_TOKEN for Socket
Mode, SLACK_SIGNING_SECRET for HTTP mode) and are never logged.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from app.cli_options import add_copilot_args, copilot_options
from core.errors import SpecragError

_ENV_HELP = """environment:
  SLACK_BOT_TOKEN       bot token (xoxb-...), always
  SLACK_APP_TOKEN       app-level token with connections:write (xapp-...), for --mode socket
  SLACK_SIGNING_SECRET  the app's signing secret, for --mode http

Create the app from app/slack/manifest.yaml (see the README's Slack section)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "slack",
        help="answer Slack mentions and direct messages in their thread",
        description="Run the Slack bot: it answers app mentions and direct messages in the thread of the asking "
        "message, streaming the answer, with sources and thumbs up/down feedback.",
        epilog=_ENV_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--mode",
        choices=("socket", "http"),
        default="socket",
        help="socket: Socket Mode, an outbound WebSocket, no public URL (default); http: serve the Events API "
        "at POST /slack/events, requests checked with SLACK_SIGNING_SECRET",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on in http mode (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=3000, help="port to listen on in http mode (default 3000)")
    parser.add_argument(
        "--channels",
        default="",
        metavar="ID[,ID...]",
        help="answer mentions only in these channel ids (default: every channel the bot is in); direct messages "
        "are always answered",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="answers in progress at once (default 1); later questions queue and are told their place. The models "
        "are loaded once, so with N > 1 answers still generate one at a time; the extra ones retrieve and wait",
    )
    parser.add_argument(
        "--no-native-stream",
        action="store_true",
        help="do not use Slack's streaming API; post a message and update it about once per second instead",
    )
    parser.add_argument(
        "--feedback-db", default=None, metavar="FILE", help="feedback store (default $SPECRAG_HOME/feedback.db)"
    )
    parser.add_argument(
        "--api-url",
        default="https://slack.com/api/",
        metavar="URL",
        help="Slack Web API base URL (default https://slack.com/api/; change it only for a proxy or a test server)",
    )
    parser.add_argument("--verbose", action="store_true", help="log each event and Slack call (tokens redacted)")
    add_copilot_args(parser)
    parser.set_defaults(func=run)


def require_env(name: str, why: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise SpecragError(f"set {name} in the environment ({why}); tokens are never taken from the command line")
    return value


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from app.copilot import Copilot
    from app.feedback import FeedbackStore
    from app.slack.bot import BridgeSettings, SlackBridge, build_app
    from app.slack.server import http_server, make_client, redact_logs, socket_mode_handler
    from app.slack.streaming import StreamSettings

    if args.concurrency < 1:
        raise SpecragError(f"--concurrency must be at least 1, got {args.concurrency}")
    options = copilot_options(args)  # validated before any token check or model load
    bot_token = require_env("SLACK_BOT_TOKEN", "the bot token, xoxb-...")
    secret_name = "SLACK_APP_TOKEN" if args.mode == "socket" else "SLACK_SIGNING_SECRET"
    secret = require_env(secret_name, "the app-level token, xapp-..." if args.mode == "socket" else "signing secret")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(name)s: %(message)s"
    )
    redact_logs([bot_token, secret])
    settings = BridgeSettings(
        channels=frozenset(c.strip() for c in args.channels.split(",") if c.strip()),
        concurrency=args.concurrency,
        stream=StreamSettings(native=not args.no_native_stream),
    )
    print("specrag: loading the models…", file=sys.stderr, flush=True)
    copilot = Copilot.load(options)
    copilot.warm_up()  # the system prompt is prefilled (or loaded, prefix_store.py) once, before the first mention
    feedback = FeedbackStore(Path(args.feedback_db) if args.feedback_db else None)
    bridge = SlackBridge(copilot, settings, feedback)
    client = make_client(bot_token, base_url=args.api_url)
    try:
        if args.mode == "socket":
            handler = socket_mode_handler(build_app(bridge, client), secret)
            handler.connect()
            print("specrag: connected to Slack over Socket Mode; Ctrl-C stops", file=sys.stderr, flush=True)
            status = _wait_for_signal()
            # Slack SDK threads left behind held the interpreter open for over a minute after
            # Ctrl-C in CI: close each part with a deadline, then leave at once.
            _exit_now(status, handler.close, bridge.close)
        else:
            server = http_server(build_app(bridge, client, http=True, signing_secret=secret), args.host, args.port)
            host, port = server.server_address[:2]
            print(f"specrag: serving Slack events at http://{host}:{port}/slack/events; Ctrl-C stops", file=sys.stderr)
            _serve_until_signal(server)
    finally:
        bridge.close()
    return 0


def _wait_for_signal() -> int:
    """Block until SIGTERM or Ctrl-C; the exit status they call for (0 or 130)."""
    stopped, status = threading.Event(), [0]

    def stop(signum: int, _frame: object) -> None:
        status[0] = 130 if signum == signal.SIGINT else 0
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopped.wait(1.0):
        pass
    return status[0]


def _exit_now(status: int, *closers: Callable[[], object], deadline: float = 5.0) -> NoReturn:
    """Run each closer for at most `deadline` seconds, flush the logs and streams, exit with `status`.

    The answer queue finishes its jobs within the deadline; the feedback store commits each write
    atomically, so nothing is lost by not waiting for stray library threads."""
    for close in closers:
        thread = threading.Thread(target=close, daemon=True)
        thread.start()
        thread.join(deadline)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _serve_until_signal(server) -> None:
    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
