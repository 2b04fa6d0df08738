"""core.atomic: a failed or killed write never leaves a torn or missing file."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from core import atomic
from core.atomic import write_atomic


def test_a_failing_rename_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_text_and_bytes_are_written_whole(tmp_path):
    write_atomic(tmp_path / "a" / "t.txt", "héllo")
    write_atomic(tmp_path / "a" / "b.bin", b"\x00\x01")
    assert (tmp_path / "a" / "t.txt").read_text(encoding="utf-8") == "héllo"
    assert (tmp_path / "a" / "b.bin").read_bytes() == b"\x00\x01"


WRITER = """
import json, sys
from core.atomic import write_atomic
i = 0
while True:
    i += 1
    write_atomic(__import__("pathlib").Path(sys.argv[1]), json.dumps({"i": i, "pad": "x" * 200000}))
"""


def test_kill_9_during_writes_leaves_a_whole_file(tmp_path):
    path = tmp_path / "store.json"
    write_atomic(path, json.dumps({"i": 0}))
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=root)
        time.sleep(0.6)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert isinstance(json.loads(path.read_text())["i"], int)  # never torn
