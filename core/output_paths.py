"""Where a command will write, checked before it does any work.

`specrag bench --out` named a folder, or a path under /proc: the bench loaded the models, measured
its first question for a minute or more, and then died with a traceback when it saved, the
measurement lost. A command that writes its results at the end (or after each question) checks
the path first, so a wrong `--out` costs a second and says what to give instead.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from core.errors import SpecragError


def output_file(path: Path | str, example: str = "results.json") -> Path:
    """`path` as a file the command can create or replace, its folder made if missing; else a SpecragError."""
    path = Path(path)
    if path.is_dir():
        raise SpecragError(f"{path} is a folder; give a file name for the results, e.g. {path / example}")
    _writable_folder(path.parent, f"cannot write {path}")
    return path


def output_dir(path: Path | str) -> Path:
    """`path` as a folder the command can write files into, made if missing; else a SpecragError."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SpecragError(f"{path} is a file, not a folder; give a folder for the results (it is made if missing)")
    _writable_folder(path, f"cannot write into {path}")
    return path


def _writable_folder(folder: Path, failed: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # a file made and removed: permission bits do not tell root (or /proc, a read-only mount) the answer
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".specrag-write-check.")
    except OSError as err:
        raise SpecragError(f"{failed} ({err.strerror or err}); choose a path you can write to") from err
    os.close(fd)
    os.unlink(probe)
