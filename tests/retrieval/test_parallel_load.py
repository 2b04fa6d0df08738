"""Reading files in worker processes gives exactly what reading them here gives, even if the pool dies."""

from __future__ import annotations

from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from retrieval import parallel_load
from retrieval.errors import SkipFile
from retrieval.parallel_load import POOL_MIN_FILES, read_all, read_one


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    paths = []
    for i in range(POOL_MIN_FILES + 4):
        path = tmp_path / f"note-{i:02d}.md"
        path.write_text(f"# Runbook {i}\n\nRestart daemon {i} with systemctl restart d{i}.\n")
        paths.append(path)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    paths += [tmp_path / "empty.txt", tmp_path / "binary.txt", tmp_path / "broken.pdf"]
    return [str(p) for p in paths]


def as_comparable(results) -> list[tuple[str, object]]:
    return [(path, str(got) if isinstance(got, SkipFile) else got) for path, got in results]


def test_workers_read_the_same_documents_and_skips(files):
    sequential = as_comparable((path, read_one(path, 10**6)) for path in files)
    parallel = as_comparable(read_all(files, 10**6, workers=2))
    assert parallel == sequential
    skipped = [path for path, got in parallel if isinstance(got, str)]
    assert [Path(p).name for p in skipped] == ["empty.txt", "binary.txt", "broken.pdf"]


class DyingPool:
    """A pool whose worker dies after three files."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def map(self, fn, paths, *rest, **kwargs):
        for path, extra in zip(list(paths)[:3], *rest, strict=False):  # repeat() is endless
            yield fn(path, extra)
        raise BrokenProcessPool("a worker died")


def test_a_dead_pool_falls_back_to_reading_here(files, monkeypatch):
    monkeypatch.setattr(parallel_load, "ProcessPoolExecutor", DyingPool)
    results = list(read_all(files, 10**6, workers=2))
    assert [path for path, _ in results] == files  # every file once, in order
    assert as_comparable(results) == as_comparable((path, read_one(path, 10**6)) for path in files)


def test_few_files_are_read_in_process(files, monkeypatch):
    monkeypatch.setattr(parallel_load, "ProcessPoolExecutor", None)  # using a pool would crash
    assert len(list(read_all(files[:3], 10**6, workers=2))) == 3
