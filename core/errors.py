"""The base of the small error vocabulary that specrag shows to users, and how commands report it."""

from __future__ import annotations

import sys
from collections.abc import Callable


class SpecragError(Exception):
    """Base class: the message says what went wrong and what to do."""


def run_reporting_errors(prog: str, command: Callable[[], int | None]) -> int:
    """Run a command's body: a SpecragError becomes one line on stderr and exit code 2, Ctrl-C exit 130."""
    try:
        return int(command() or 0)
    except SpecragError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
