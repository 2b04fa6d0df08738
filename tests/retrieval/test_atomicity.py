"""A failed, interrupted or killed ingest leaves the previous index live and loadable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from retrieval_fakes import FakeEmbedder

from retrieval.index import HybridIndex
from retrieval.ingest import ingest
from retrieval.retriever import open_index
from retrieval.store import CURRENT

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def generations(index_dir: Path) -> list[str]:
    return sorted(p.name for p in index_dir.iterdir() if p.name.startswith("gen-"))


def assert_previous_index_serves(index_dir: Path, live_before: str) -> None:
    assert (index_dir / CURRENT).read_text().strip() == live_before
    retriever = open_index(index_dir, FakeEmbedder())
    hits = retriever.retrieve("munge key rotation", k=3)
    assert hits and any("munge-keys.txt" in h.source for h in hits)
    assert all("ops-secrets" not in h.text for h in hits)  # the edit never became visible


def edit(docs: Path) -> None:
    with open(docs / "munge-keys.txt", "a") as handle:
        handle.write("\nKeys live in a vault; fetch them with the ops-secrets tool.\n")


@pytest.fixture
def built(docs, tmp_path):
    index = tmp_path / "index"
    ingest([docs], index, embedder=FakeEmbedder())
    return index, (index / CURRENT).read_text().strip()


class ExplodingEmbedder(FakeEmbedder):
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def embed_documents(self, texts, progress=False):
        raise self.error


@pytest.mark.parametrize("error", [RuntimeError("out of memory"), KeyboardInterrupt()])
def test_error_inside_embedding_keeps_previous_index(docs, built, error):
    index, live_before = built
    edit(docs)
    with pytest.raises(type(error)):
        ingest([docs], index, embedder=ExplodingEmbedder(error))
    assert_previous_index_serves(index, live_before)
    assert generations(index) == [live_before]


def test_interrupt_while_writing_removes_the_partial_generation(docs, built, monkeypatch):
    index, live_before = built
    edit(docs)
    original = HybridIndex.save

    def save_then_interrupt(self, directory):
        original(self, directory)
        raise KeyboardInterrupt

    monkeypatch.setattr(HybridIndex, "save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        ingest([docs], index, embedder=FakeEmbedder())
    assert_previous_index_serves(index, live_before)
    assert generations(index) == [live_before]


KILLED_INGEST = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path[:0] = [{repo!r}, {here!r}]
    from retrieval_fakes import FakeEmbedder
    from retrieval import index as index_module
    from retrieval.ingest import ingest

    stage, docs, index_dir, flag = sys.argv[1:]

    def stall():
        Path(flag).touch()
        time.sleep(120)

    class StallingEmbedder(FakeEmbedder):
        def embed_documents(self, texts, progress=False):
            if stage == "embed":
                stall()
            return super().embed_documents(texts)

    save = index_module.HybridIndex.save
    def stalling_save(self, directory):
        save(self, directory)
        stall()
    if stage == "write":
        index_module.HybridIndex.save = stalling_save

    ingest([Path(docs)], Path(index_dir), embedder=StallingEmbedder())
    """
)


@pytest.mark.parametrize("stage", ["embed", "write"])
def test_sigkill_mid_ingest_keeps_previous_index(docs, built, tmp_path, stage):
    index, live_before = built
    edit(docs)
    script, flag = tmp_path / "killed_ingest.py", tmp_path / "stalled"
    script.write_text(KILLED_INGEST.format(repo=str(REPO), here=str(HERE)))
    proc = subprocess.Popen([sys.executable, str(script), stage, str(docs), str(index), str(flag)])
    try:
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert proc.poll() is None, "the ingest subprocess exited early"
            assert time.monotonic() < deadline, "the ingest subprocess never reached the stall point"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert_previous_index_serves(index, live_before)
    if stage == "write":
        assert len(generations(index)) == 2  # the orphan is there, but nothing points at it
    report = ingest([docs], index, embedder=FakeEmbedder())  # the lock died with the process
    assert report.written and generations(index) == [(index / CURRENT).read_text().strip()]
    assert "ops-secrets" in open_index(index, FakeEmbedder()).bm25.retrieve("ops-secrets vault", k=1)[0].text
