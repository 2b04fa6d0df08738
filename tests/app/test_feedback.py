"""The feedback store: durable votes under concurrent writers, kill -9 and damaged files."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.cli import main
from app.feedback import FeedbackError, FeedbackStore, Vote

ROOT = Path(__file__).parents[2]


def vote(i=0, rating="up"):
    return Vote(
        rating, f"question {i}", f"answer {i}", [{"number": 1, "path": "a.md"}], {"new_tokens": i}, {"target": "t"}
    )


def test_a_vote_round_trips_with_its_sources_stats_and_models(tmp_path):
    store = FeedbackStore(tmp_path / "f.db")
    store.record(
        Vote("down", "q", "a", [{"path": "x.md"}], {"tok_s": 2.5}, {"target": "t"}, "wrong flag", "slack", "U1", "T1")
    )
    (row,) = store.all()
    assert row["rating"] == "down" and row["comment"] == "wrong flag" and row["sources"] == [{"path": "x.md"}]
    assert row["stats"] == {"tok_s": 2.5} and (row["channel"], row["user"], row["thread"]) == ("slack", "U1", "T1")
    assert row["created_at"] > 0


def test_bad_rating_is_refused():
    with pytest.raises(FeedbackError, match="'up' or 'down'"):
        Vote("meh", "q", "a")


def test_concurrent_writers_lose_nothing(tmp_path):
    store = FeedbackStore(tmp_path / "f.db")

    def write(offset):
        for i in range(25):
            FeedbackStore(store.path).record(vote(offset + i))

    threads = [threading.Thread(target=write, args=(n * 100,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = store.all()
    assert len(rows) == 100 and len({r["question"] for r in rows}) == 100


WRITER = """
import sys
from pathlib import Path
from app.feedback import FeedbackStore, Vote
store = FeedbackStore(Path(sys.argv[1]))
i = 0
while True:
    store.record(Vote("up", f"q{i}", "a" * 5000))
    i += 1
"""


def test_kill_9_mid_write_keeps_every_committed_vote_readable(tmp_path):
    path = tmp_path / "f.db"
    FeedbackStore(path).record(vote(0))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT)
    time.sleep(1.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = FeedbackStore(path)
    rows = store.all()
    assert rows[0]["question"] == "question 0" and len(rows) > 1
    assert [r["question"] for r in rows[1:]] == [f"q{i}" for i in range(len(rows) - 1)]  # no gap, no torn row
    store.record(vote(1))  # still writable
    assert len(store.all()) == len(rows) + 1


def test_a_damaged_store_is_a_clear_error(tmp_path):
    path = tmp_path / "f.db"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(FeedbackError, match="move the file aside"):
        FeedbackStore(path)


def test_export_command_writes_json_lines(tmp_path, capsys):
    db = tmp_path / "f.db"
    store = FeedbackStore(db)
    store.record(vote(1))
    store.record(vote(2, "down"))
    out = tmp_path / "votes.jsonl"
    assert main(["feedback", "export", "--out", str(out), "--db", str(db)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["rating"] for line in lines] == ["up", "down"] and "exported 2 votes" in capsys.readouterr().err


def test_export_to_a_folder_or_an_unwritable_path_says_what_to_give(tmp_path, capsys):
    db = tmp_path / "feedback.db"
    (tmp_path / "plain").write_text("x")
    assert main(["feedback", "export", "--out", str(tmp_path), "--db", str(db)]) == 2
    assert "is a folder; give a file name for the results, e.g." in capsys.readouterr().err
    assert main(["feedback", "export", "--out", str(tmp_path / "plain" / "v.jsonl"), "--db", str(db)]) == 2
    assert "choose a path you can write to" in capsys.readouterr().err
