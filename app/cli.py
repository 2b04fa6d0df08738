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
    from core.errors import SpecragError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SpecragError as err:
        print(f"specrag: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specrag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
