"""A run killed with SIGKILL midway, resumed: no question lost, none written twice."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.cli import build_parser
from app.eval_cmd import run

from .evalkit import factory

EVALKIT = Path(__file__).with_name("evalkit.py")
TOPICS = ["munge key", "GPU node drain", "slurmctld restart", "database backup"]


def questions_file(tmp_path: Path, n: int = 10) -> Path:
    rows = [
        {"id": f"q{i:02d}", "question": f"What about the {TOPICS[i % 4]}? ({i})", "gold_sources": ["munge-keys.txt"]}
        for i in range(n)
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def ids_in(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def wait_for_rows(path: Path, child: subprocess.Popen, at_least: int, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert child.poll() is None, "the eval child ended before it could be killed"
        if path.exists() and path.read_text().count("\n") >= at_least:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {at_least} rows in {path} after {timeout_s} s")


def test_resume_after_sigkill_loses_nothing_and_duplicates_nothing(tmp_path, fake_index, loaded_tiny):
    questions, out = questions_file(tmp_path), tmp_path / "out"
    results = out / "results.jsonl"
    flags = ["--out", str(out), "--max-new-tokens", "8", "-k", "2"]
    child = subprocess.Popen(
        [sys.executable, str(EVALKIT), str(fake_index), str(questions), *flags],
        cwd=Path(__file__).parents[2],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_rows(results, child, at_least=3)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    before = results.read_text().splitlines()
    assert 3 <= len(before) < 10
    with open(results, "a") as handle:  # and a row torn mid-write, as a kill inside write() leaves it
        handle.write('{"id": "q09", "answer": {"text": "cut sh')

    args = build_parser().parse_args(["eval", str(questions), *flags, "--resume"])
    assert run(args, factory(fake_index, loaded_tiny)) == 0
    ids = ids_in(results)
    assert sorted(ids) == [f"q{i:02d}" for i in range(10)]  # nothing lost, nothing twice
    assert results.read_text().splitlines()[: len(before)] == before  # finished rows untouched
    assert json.loads((out / "report.json").read_text())["questions"] == 10


def test_resume_of_a_finished_run_changes_nothing(tmp_path, fake_index):
    questions, out = questions_file(tmp_path, n=3), tmp_path / "out"
    argv = ["eval", str(questions), "--out", str(out), "--retrieval-only"]
    run(build_parser().parse_args(argv), factory(fake_index, None))
    before = (out / "results.jsonl").read_text()
    loads = []

    def never(options, retrieval_only):
        loads.append(1)
        raise AssertionError("nothing left to do: no copilot should be loaded")

    run(build_parser().parse_args([*argv, "--resume"]), never)
    assert (out / "results.jsonl").read_text() == before and loads == []
