"""The `specrag` command: one subcommand per module, imported lazily so `--help` is fast."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand name -> module exposing `register(subparsers)`; each sets `func` on its parser.
COMMANDS = {
    "ask": "app.ask",
    "bench": "app.bench",
    "chat": "app.chat_cmd",
    "eval": "app.eval_cmd",
    "feedback": "app.feedback_cmd",
    "ingest": "app.ingest_cmd",
    "search": "app.search_cmd",
    "slack": "app.slack_cmd",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specrag", description=__doc__.split(":")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.errors import run_reporting_errors

    args = build_parser().parse_args(argv)
    return run_reporting_errors("specrag", lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
