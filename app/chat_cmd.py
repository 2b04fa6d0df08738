"""`specrag chat`: the streaming web chat, a front end of the copilot pipeline.

The server is up at once; the runbook index (default index only, first start) and the
models load in the background while the page shows their progress. Binds 127.0.0.1 by
default; never creates share links; login is optional, from SPECRAG_CHAT_USER and
SPECRAG_CHAT_PASSWORD (both or neither).
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys

from app.cli_options import add_copilot_args, copilot_options
from core.errors import SpecragError

USER_ENV, PASSWORD_ENV = "SPECRAG_CHAT_USER", "SPECRAG_CHAT_PASSWORD"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="start the web chat (streaming answers, sources, provenance, feedback)",
        description="Serve the web chat on http://HOST:PORT. Without --index it answers from the default index, "
        "building it from the bundled runbooks on the first start.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=port_number, default=7860, help="port (default 7860)")
    parser.add_argument("--feedback-db", default=None, help="feedback SQLite file (default $SPECRAG_HOME/feedback.db)")
    add_copilot_args(parser)
    # hidden, for tests: sleep this long after each streamed event (a slow model on tiny weights)
    parser.add_argument("--event-delay", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def login_from_env() -> tuple[str, str] | None:
    user, password = os.environ.get(USER_ENV, ""), os.environ.get(PASSWORD_ENV, "")
    if bool(user) != bool(password):
        raise SpecragError(f"set both {USER_ENV} and {PASSWORD_ENV} for a login, or neither")
    return (user, password) if user else None


def port_number(text: str) -> int:
    """argparse type for --port: a TCP port, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {text!r}")
    return port


def ensure_port_free(host: str, port: int) -> None:
    """Fail before any model loads when the chat could not listen on host:port."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            advice = "another program, perhaps another specrag chat, uses that port; pass --port with a free one"
        else:
            advice = "pass --host with an address of this machine (default 127.0.0.1)"
        raise SpecragError(f"cannot listen on {host}:{port} ({err.strerror or err}): {advice}") from err


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from pathlib import Path

    from app.feedback import FeedbackStore
    from app.web.backend import Backend

    options = copilot_options(args)
    auth = login_from_env()
    ensure_port_free(args.host, args.port)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"specrag chat: warning: binding {args.host} exposes the chat to your network"
            + ("" if auth else f"; set {USER_ENV} and {PASSWORD_ENV} to require a login"),
            file=sys.stderr,
        )
    feedback = FeedbackStore(Path(args.feedback_db) if args.feedback_db else None)
    backend = Backend(options, build_runbook_index=args.index is None, feedback=feedback).start()
    from app.web.layout import CSS, build_app  # gradio's import overlaps the loading

    app = build_app(backend, options.answer, event_delay=args.event_delay)
    app.queue(default_concurrency_limit=1)
    print(f"specrag chat: serving on http://{args.host}:{args.port} (feedback in {feedback.path})", file=sys.stderr)
    app.launch(
        server_name=args.host,
        server_port=args.port,
        share=False,
        auth=auth,
        css=CSS,
        theme=_theme(),
        footer_links=["api"],
        run_history=False,
        show_error=True,
        quiet=True,
    )
    return 0


def _theme():
    import gradio as gr

    return gr.themes.Default(
        primary_hue="blue",
        neutral_hue="slate",
        font=["system-ui", "-apple-system", "Segoe UI", "sans-serif"],
        font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"],
        radius_size="sm",
    )
