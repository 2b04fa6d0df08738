"""DIR/results.jsonl: one JSON row per finished question, appended as it is produced.

Each row is written with one write() of a whole line, then flushed and fsync'ed, so a
killed run loses at most the row it was writing. On opening, the file is read back: a
torn last line (no newline, or not valid JSON, as a kill mid-write leaves it) is cut off
the file, and only rows with an `id` count as finished. A row that appears twice (never
written by us, but possible after a manual merge) counts once: the first is kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.errors import SpecragError


class ResultsFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.repaired = 0  # bytes of a torn last line cut off on opening

    @property
    def finished(self) -> set[str]:
        return {str(row["id"]) for row in self.rows}

    def open(self, resume: bool) -> ResultsFile:
        """Read back the rows already written (resume), or insist on an empty file (fresh run)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size and not resume:
            raise SpecragError(
                f"{self.path} already holds results: pass --resume to continue that run, or choose another --out"
            )
        if self.path.exists():
            self.rows, self.repaired = load_rows(self.path, repair=True)
        return self

    def append(self, row: dict[str, Any]) -> None:
        if str(row["id"]) in self.finished:
            return  # never write a question twice
        line = json.dumps(row, ensure_ascii=False, default=_jsonable) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        self.rows.append(row)


RESULTS_NAME = "results.jsonl"


def results_file(path: Path) -> Path:
    """A run's results file, given it or the run's directory (`--out`)."""
    return path / RESULTS_NAME if path.is_dir() else path


def read_results(path: Path) -> list[dict[str, Any]]:
    """The finished rows of an eval run, given its results file or the run's directory (`--out`).

    For the tools that read a run (`app.eval.bar`, `app.eval.rescore`): a torn last line, as a run
    killed mid-write leaves it, is skipped and the file left as it is."""
    file = results_file(path)
    try:
        return load_rows(file)[0]
    except FileNotFoundError:
        where = f"{path} holds no {RESULTS_NAME}" if path.is_dir() else f"{path} does not exist"
        raise SpecragError(f"{where}: give the directory an eval wrote (--out) or its {RESULTS_NAME}") from None
    except OSError as err:
        raise SpecragError(f"cannot read {file}: {err.strerror or err}") from None


def load_rows(path: Path, repair: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The complete rows of a results file (first of each id) and how many torn bytes were at its end.

    A last line without its newline is kept when it is a whole row (the newline is added
    with `repair`), else it is torn: with `repair` it is truncated off the file, so later
    appends start on a fresh line.
    """
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    tail = _row(data[end:]) if end < len(data) else None
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for raw in [*data[:end].splitlines(), *([data[end:]] if tail else [])]:
        row = _row(raw)
        if row is not None and str(row["id"]) not in seen:
            seen.add(str(row["id"]))
            rows.append(row)
    torn = 0 if tail else len(data) - end
    if repair and end < len(data):
        with open(path, "r+b") as handle:
            handle.truncate(len(data) if tail else end)
            if tail:
                handle.seek(len(data))
                handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())
    return rows, torn


def _row(raw: bytes) -> dict[str, Any] | None:
    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return row if isinstance(row, dict) and "id" in row else None


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()  # numpy scalars
    if isinstance(value, set | tuple):
        return list(value)
    return str(value)
