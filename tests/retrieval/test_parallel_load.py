"""Reading (and chunking) files in worker processes gives exactly what doing it here gives,
even if the pool dies."""

from __future__ import annotations

from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from retrieval import parallel_load
from retrieval.chunking import ChunkParams, ChunkRecipe, chunk_document, make_splitter
from retrieval.parallel_load import POOL_MIN_FILES, read_all, read_one


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    paths = []
    for i in range(POOL_MIN_FILES + 4):
        path = tmp_path / f"note-{i:02d}.md"
        body = " ".join(f"Restart daemon {i}.{j} with systemctl restart d{j}." for j in range(40))
        path.write_text(f"# Runbook {i}\n\n{body}\n\n## Check\n\nRun sinfo and squeue.\n")
        paths.append(path)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    paths += [tmp_path / "empty.txt", tmp_path / "binary.txt", tmp_path / "broken.pdf"]
    return [str(p) for p in paths]


def here(files: list[str], recipe: ChunkRecipe | None = None) -> list:
    return [(path, read_one(path, 10**6, recipe)) for path in files]


def test_workers_read_the_same_documents_and_skips(files):
    parallel = list(read_all(files, 10**6, workers=2))
    assert parallel == here(files)
    skipped = [Path(path).name for path, outcome in parallel if outcome.skipped]
    assert skipped == ["empty.txt", "binary.txt", "broken.pdf"]
    assert all(outcome.chunks is None for _, outcome in parallel)  # no recipe: chunking is left to the caller


def test_workers_chunk_exactly_as_the_embedder_counts(files, minilm):
    recipe = ChunkRecipe(str(minilm.tokenizer_file), ChunkParams(chunk_tokens=40, overlap_tokens=8))
    parallel = list(read_all(files, 10**6, recipe, workers=2))
    assert parallel == here(files, recipe)
    splitter = make_splitter(minilm.count_tokens, recipe.params)  # the in-process path of ingest
    for _, outcome in parallel:
        if outcome.document is not None:
            assert len(outcome.chunks) > 2
            assert outcome.chunks == chunk_document(outcome.document, splitter)


class DyingPool:
    """A pool whose worker dies after three files."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass

    def map(self, fn, paths, *rest, **kwargs):
        for path, *extra in zip(list(paths)[:3], *rest, strict=False):  # repeat() is endless
            yield fn(path, *extra)
        raise BrokenProcessPool("a worker died")


def test_a_dead_pool_falls_back_to_reading_here(files, monkeypatch):
    monkeypatch.setattr(parallel_load, "ProcessPoolExecutor", DyingPool)
    results = list(read_all(files, 10**6, workers=2))
    assert [path for path, _ in results] == files  # every file once, in order
    assert results == here(files)


def test_an_abandoned_read_cancels_the_queued_files(files, monkeypatch):
    shutdowns = []

    class Spy(DyingPool):
        def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
            shutdowns.append(cancel_futures)

    monkeypatch.setattr(parallel_load, "ProcessPoolExecutor", Spy)
    reading = read_all(files, 10**6, workers=2)
    next(reading)
    reading.close()  # what an exception in the consumer (Ctrl-C) does to the generator
    assert shutdowns == [True]


def test_few_files_are_read_in_process(files, monkeypatch):
    monkeypatch.setattr(parallel_load, "ProcessPoolExecutor", None)  # using a pool would crash
    assert len(list(read_all(files[:3], 10**6, workers=2))) == 3
