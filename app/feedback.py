"""The feedback store: thumbs up/down on answers, from the web chat and Slack alike.

SQLite (stdlib sqlite3) in WAL mode: readers never block the writer, one transaction
per vote, so a crash or kill -9 loses at most the vote being written and never corrupts
the ones before it. Each call opens its own connection, so any thread may record.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.atomic import write_atomic
from core.errors import SpecragError
from core.paths import cache_root

RATINGS = ("up", "down")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    rating TEXT NOT NULL CHECK (rating IN ('up', 'down')),
    comment TEXT NOT NULL DEFAULT '',
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    sources TEXT NOT NULL,
    stats TEXT NOT NULL,
    models TEXT NOT NULL,
    channel TEXT NOT NULL,
    user TEXT NOT NULL DEFAULT '',
    thread TEXT NOT NULL DEFAULT ''
)
"""
_JSON_FIELDS = ("sources", "stats", "models")


class FeedbackError(SpecragError):
    """The feedback store cannot be opened, written or exported."""


@dataclass(frozen=True)
class Vote:
    rating: str  # "up" | "down"
    question: str
    answer: str
    sources: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    models: dict[str, Any] = field(default_factory=dict)
    comment: str = ""
    channel: str = "web"  # "web" | "slack" | ...
    user: str = ""
    thread: str = ""

    def __post_init__(self) -> None:
        if self.rating not in RATINGS:
            raise FeedbackError(f"a vote is 'up' or 'down', got {self.rating!r}")


def default_feedback_path() -> Path:
    return cache_root() / "feedback.db"


class FeedbackStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_feedback_path()
        with self._connect() as db:
            db.execute(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(self.path, timeout=30)) as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
                with db:  # one transaction: committed on success, rolled back on error
                    yield db
        except sqlite3.DatabaseError as err:
            raise FeedbackError(
                f"cannot use the feedback store {self.path}: {err}; move the file aside to start a new one"
            ) from err

    def record(self, vote: Vote) -> int:
        """Store one vote; returns its id."""
        row = asdict(vote) | {name: json.dumps(getattr(vote, name), ensure_ascii=False) for name in _JSON_FIELDS}
        row["created_at"] = time.time()
        columns = ", ".join(row)
        with self._connect() as db:
            cursor = db.execute(
                f"INSERT INTO feedback ({columns}) VALUES ({', '.join('?' * len(row))})", list(row.values())
            )
            return int(cursor.lastrowid)

    def all(self) -> list[dict[str, Any]]:
        with self._connect() as db:
            db.row_factory = sqlite3.Row
            rows = db.execute("SELECT * FROM feedback ORDER BY id").fetchall()
        return [dict(r) | {name: json.loads(r[name]) for name in _JSON_FIELDS} for r in rows]

    def export_jsonl(self, out: Path) -> int:
        """Write every vote as one JSON line, atomically; returns how many."""
        rows = self.all()
        write_atomic(Path(out), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        return len(rows)
