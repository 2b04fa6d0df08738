"""Index directory rules: model and parameter mismatches are refused, foreign dirs are left alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from retrieval_fakes import FakeEmbedder

from generation.errors import SpecragError
from retrieval.errors import IndexBusyError, IndexMismatchError, IndexNotFoundError
from retrieval.ingest import IngestOptions, ingest
from retrieval.retriever import open_index
from retrieval.store import MANIFEST, current_generation, default_index_dir, ingest_lock


@pytest.fixture
def index(docs, tmp_path):
    index_dir = tmp_path / "index"
    ingest([docs], index_dir, IngestOptions(chunk_tokens=120, overlap_tokens=10), embedder=FakeEmbedder("model-a"))
    return index_dir


def test_ingest_with_another_model_is_refused_with_rebuild_advice(docs, index):
    with pytest.raises(IndexMismatchError) as caught:
        ingest([docs], index, embedder=FakeEmbedder("model-b"))
    message = str(caught.value)
    assert "model-a" in message and "model-b" in message and "--rebuild" in message
    assert isinstance(caught.value, SpecragError)


def test_ingest_with_other_chunking_is_refused(docs, index):
    with pytest.raises(IndexMismatchError, match="chunk_tokens"):
        ingest([docs], index, IngestOptions(chunk_tokens=200), embedder=FakeEmbedder("model-a"))


def test_unset_options_adopt_the_index_settings(docs, index):
    (docs / "extra.txt").write_text("sreport shows cluster utilisation.\n")
    report = ingest([docs], index, embedder=FakeEmbedder("model-a"))
    manifest = json.loads((current_generation(index) / MANIFEST).read_text())
    assert report.written and manifest["chunking"] == {"chunk_tokens": 120, "overlap_tokens": 10}


def test_rebuild_switches_model(docs, index):
    report = ingest([docs], index, IngestOptions(rebuild=True), embedder=FakeEmbedder("model-b", dim=32))
    assert report.written and report.unchanged == 0 and len(report.added) == 4
    assert open_index(index, FakeEmbedder("model-b", dim=32)).retrieve("munge", k=1)


def test_querying_with_another_model_is_refused(index):
    with pytest.raises(IndexMismatchError, match="--rebuild"):
        open_index(index, FakeEmbedder("model-b"))


def test_newer_format_version_is_refused(index):
    path = current_generation(index) / MANIFEST
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "version": 99}))
    with pytest.raises(IndexMismatchError, match=r"format 99.*--rebuild"):
        open_index(index, FakeEmbedder("model-a"))


def test_missing_index_says_how_to_build_one(tmp_path):
    with pytest.raises(IndexNotFoundError, match="specrag ingest"):
        open_index(tmp_path / "nowhere", FakeEmbedder())


def test_foreign_directory_is_not_used_as_an_index(docs, tmp_path):
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(IndexMismatchError, match="not a specrag index"):
        ingest([docs], foreign, embedder=FakeEmbedder())
    assert [p.name for p in foreign.iterdir()] == ["cat.jpg"]


def test_concurrent_ingest_is_refused(docs, index):
    with ingest_lock(index), pytest.raises(IndexBusyError):
        ingest([docs], index, embedder=FakeEmbedder("model-a"))


def test_index_files_are_plain_data(index):
    generation = current_generation(index)
    names = sorted(p.relative_to(generation).as_posix() for p in generation.rglob("*") if p.is_file())
    assert (generation / "lease").stat().st_size == 0  # the readers' lock file holds no data
    names.remove("lease")
    assert all(n.endswith((".json", ".jsonl", ".npy")) for n in names), names


def test_default_index_dir_honours_specrag_home(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path))
    assert default_index_dir() == tmp_path / "index"
    monkeypatch.delenv("SPECRAG_HOME")
    assert default_index_dir() == Path.home() / ".cache" / "specrag" / "index"
