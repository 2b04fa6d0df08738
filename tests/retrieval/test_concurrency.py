"""Readers never fail during writes: searches before, during and after ingests all succeed, a
killed reader pins nothing, and a long-running retriever follows new generations.

Each search sleeps between pinning its generation and reading it (as the real one spends ~5 s
loading the embedder there), and each ingest stalls while embedding, so reads and swaps overlap.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from retrieval_fakes import FakeEmbedder

from retrieval.index import CHUNKS, HybridIndex
from retrieval.ingest import ingest
from retrieval.live import LiveRetriever
from retrieval.retriever import open_index
from retrieval.store import CURRENT

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
THREADS, SEARCHES_PER_THREAD, INGESTS = 4, 5, 3


def generations(index_dir: Path) -> list[str]:
    return sorted(p.name for p in index_dir.iterdir() if p.name.startswith("gen-"))


def live(index_dir: Path) -> str:
    return (index_dir / CURRENT).read_text().strip()


class SlowEmbedder(FakeEmbedder):
    def embed_documents(self, texts, progress=False):
        time.sleep(0.3)
        return super().embed_documents(texts)


@pytest.fixture
def slow_open(monkeypatch):
    """A pause between pinning a generation and reading its files: where the old code lost them."""
    load = HybridIndex.load.__func__

    def paused_load(cls, directory, dim):
        time.sleep(0.15)
        return load(cls, directory, dim)

    monkeypatch.setattr(HybridIndex, "load", classmethod(paused_load))


def test_twenty_searches_across_three_ingests_all_succeed(docs, tmp_path, slow_open):
    index = tmp_path / "index"
    ingest([docs], index, embedder=FakeEmbedder())
    outcomes: list[tuple[float, float, str | None]] = []  # start, end, error
    lock = threading.Lock()

    def searcher(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(SEARCHES_PER_THREAD):
            time.sleep(rng.uniform(0.0, 0.3))
            started, error = time.monotonic(), None
            try:
                assert open_index(index, FakeEmbedder()).retrieve("rotate the munge key", k=3)
            except Exception as err:  # recorded: the assertion below shows every failure
                error = f"{type(err).__name__}: {err}"
            with lock:
                outcomes.append((started, time.monotonic(), error))

    threads = [threading.Thread(target=searcher, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    windows = []
    for round_ in range(INGESTS):
        with open(docs / "munge-keys.txt", "a") as handle:
            handle.write(f"\nRound {round_}: rotate the munge key again.\n")
        started = time.monotonic()
        assert ingest([docs], index, embedder=SlowEmbedder()).written
        windows.append((started, time.monotonic()))
    for thread in threads:
        thread.join()

    errors = [error for _, _, error in outcomes if error]
    assert len(outcomes) == THREADS * SEARCHES_PER_THREAD and errors == []
    overlapping = [o for o in outcomes if any(o[0] < end and o[1] > start for start, end in windows)]
    print(f"{len(outcomes)} searches, {len(overlapping)} overlapped an ingest, 0 failed")
    assert overlapping  # the test exercised the race it is about
    assert generations(index) == [live(index)]  # readers done: nothing left behind


PINNING_READER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path[:0] = [{repo!r}]
    from retrieval.store import pin_live

    lease = pin_live(Path(sys.argv[1]))
    Path(sys.argv[2]).write_text(lease.generation.name)
    time.sleep(120)
    """
)


def test_reader_killed_with_sigkill_pins_nothing(docs, tmp_path):
    index, flag = tmp_path / "index", tmp_path / "pinned"
    ingest([docs], index, embedder=FakeEmbedder())
    script = tmp_path / "reader.py"
    script.write_text(PINNING_READER.format(repo=str(REPO)))
    proc = subprocess.Popen([sys.executable, str(script), str(index), str(flag)])
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() or not flag.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the reader never pinned"
            time.sleep(0.05)
        pinned = flag.read_text()
        (docs / "munge-keys.txt").write_text("Rotate the munge key monthly.\n")
        ingest([docs], index, embedder=FakeEmbedder())
        assert pinned in generations(index)  # a live reader keeps its generation
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        proc.kill()
        proc.wait()
    (docs / "munge-keys.txt").write_text("Rotate the munge key weekly.\n")
    ingest([docs], index, embedder=FakeEmbedder())
    assert generations(index) == [live(index)]


def test_live_retriever_follows_new_generations_and_survives_a_damaged_one(docs, tmp_path):
    index = tmp_path / "index"
    ingest([docs], index, embedder=FakeEmbedder())
    server = LiveRetriever(index, FakeEmbedder(), mode="bm25")
    assert not server.retrieve("quasar telemetry", k=1)
    (docs / "quasar.md").write_text("# Quasar\n\nQuasar telemetry lands in /var/log/quasar.\n")
    ingest([docs], index, embedder=FakeEmbedder())
    hits = server.retrieve("quasar telemetry", k=1)  # next query, same object: no restart
    assert hits and hits[0].source.endswith("quasar.md") and server.generation == live(index)
    serving = server.generation
    (docs / "quasar.md").write_text("# Quasar\n\nQuasar telemetry moved to /srv/quasar.\n")
    ingest([docs], index, embedder=FakeEmbedder())
    chunks = Path(index / live(index) / CHUNKS)
    chunks.write_text(chunks.read_text().replace("moved", "MOVED"))  # damage the new generation
    assert server.retrieve("quasar telemetry", k=1)  # still served, from the previous generation
    assert server.generation == serving and "checksum" in str(server.last_error)
