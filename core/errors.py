"""The base of the small error vocabulary that specrag shows to users, and how commands report it."""

from __future__ import annotations

import sys
from collections.abc import Callable


class SpecragError(Exception):
    """Base class: the message says what went wrong and what to do."""


def run_reporting_errors(prog: str, command: Callable[[], int | None]) -> int:
    """Run a command's body: a SpecragError becomes one line on stderr and exit code 2, Ctrl-C exit 130.

    An OSError no command foresaw (a full disk, a path it may not write, a port in use) becomes one line
    naming the file, exit code 1: the operator can act on "No space left on device: /data/run/results.jsonl",
    not on a traceback through tempfile.
    """
    try:
        return int(command() or 0)
    except SpecragError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{prog}: error: {os_error_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def os_error_line(err: OSError) -> str:
    """'No space left on device: /data/x.json' (both names of a failed rename), or the error's own text."""
    names = [str(name) for name in (err.filename, err.filename2) if name is not None]
    if err.strerror and names:
        return f"{err.strerror}: {' -> '.join(names)}; check the path, its permissions and the free space"
    return str(err) or type(err).__name__
