from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from retrieval_fakes import FakeEmbedder, every_model_load_gives

from retrieval.errors import RetrievalError
from retrieval.ingest import IngestOptions, ingest
from retrieval.retriever import open_index
from retrieval.store import CURRENT, current_generation, read_manifest


def sources(index_dir: Path) -> set[str]:
    retriever = open_index(index_dir, FakeEmbedder())
    return {Path(c.source).name for c in retriever.index.chunks}


def live(index_dir: Path) -> str:
    return (index_dir / CURRENT).read_text().strip()


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fail loudly if the ingest tries to load a real embedding model."""

    def refuse():
        raise AssertionError("the embedding model was loaded")

    every_model_load_gives(monkeypatch, refuse)


def test_first_ingest_indexes_every_supported_file(docs, tmp_path, fake):
    (docs / "diagram.png").write_bytes(b"\x89PNG....")
    report = ingest([docs], tmp_path / "index", embedder=fake)
    names = {Path(p).name for p in report.added}
    assert names == {"runbook-slurmctld.md", "munge-keys.txt", "gpu-drain.rst", "backup.html"}
    assert report.written and report.ignored == {".png": 1}
    assert report.chunks == report.embedded_chunks == len(fake.embedded) > 0
    assert sources(tmp_path / "index") == names
    manifest = read_manifest(current_generation(tmp_path / "index"))
    assert manifest["roots"] == [str(docs.resolve())]
    entry = manifest["files"][str(docs.resolve() / "munge-keys.txt")]
    assert len(entry["sha256"]) == 64 and entry["chunks"] >= 1


def test_compressed_documents_are_indexed_and_followed_like_plain_ones(docs, tmp_path, fake):
    # a Debian doc folder: guide.md.gz is a document, changelog.Debian.gz is not
    (docs / "icinga.md.gz").write_bytes(gzip.compress(b"# Checks\n\nRun icinga2 daemon -C before a restart.\n"))
    (docs / "changelog.Debian.gz").write_bytes(gzip.compress(b"icinga2 (2.13) unstable; urgency=medium\n"))
    report = ingest([docs], tmp_path / "index", embedder=fake)
    assert "icinga.md.gz" in {Path(p).name for p in report.added} and report.ignored == {".gz": 1}
    retriever = open_index(tmp_path / "index", FakeEmbedder())
    chunk = next(c for c in retriever.index.chunks if c.source.endswith("icinga.md.gz"))
    assert "icinga2 daemon -C" in chunk.text and chunk.title == "Checks"
    (docs / "icinga.md.gz").write_bytes(gzip.compress(b"# Checks\n\nRun icinga2 daemon -C, then reload.\n"))
    again = ingest([docs], tmp_path / "index", embedder=fake)
    assert [Path(p).name for p in again.updated] == ["icinga.md.gz"] and not again.added


def test_a_sphinx_builds_copies_of_its_sources_are_skipped_and_reported(docs, tmp_path, fake):
    # rsyslog's manual: every page twice, as HTML and as _sources/<page>.rst.txt, took two passages of six
    site = docs / "site"
    (site / "_sources" / "modules").mkdir(parents=True)
    (site / "imfile.html").write_text("<html><body><h1>imfile</h1><p>Text file input module.</p></body></html>")
    (site / "_sources" / "modules" / "imfile.rst.txt").write_text("imfile\n======\n\nText file input module.\n")
    (site / "searchindex.js").write_text("Search.setIndex({})")
    (docs / "notes" / "_sources").mkdir(parents=True)  # not a Sphinx build: nothing marks it as one
    (docs / "notes" / "_sources" / "readme.txt").write_text("Where our own notes come from.\n")
    report = ingest([docs], tmp_path / "index", embedder=fake)
    added = {Path(p).name for p in report.added}
    assert "imfile.html" in added and "imfile.rst.txt" not in added and "readme.txt" in added
    skipped = {s["path"]: s["reason"] for s in report.skipped}
    assert "Sphinx" in skipped[str(site / "_sources")]


def test_a_link_to_a_file_no_reader_takes_is_ignored_even_when_broken(docs, tmp_path, fake):
    (docs / "jquery.js").symlink_to(tmp_path / "elsewhere" / "jquery.js")  # Debian links these to another package
    (docs / "gone.md").symlink_to(docs / "missing.md")
    report = ingest([docs], tmp_path / "index", embedder=fake)
    assert report.ignored == {".js": 1}
    assert [Path(s["path"]).name for s in report.skipped] == ["gone.md"]


def test_unchanged_reingest_writes_nothing_and_loads_no_model(docs, tmp_path, fake, no_model_loading):
    index = tmp_path / "index"
    ingest([docs], index, embedder=fake)
    before = live(index)
    os.utime(docs / "munge-keys.txt")  # touched, same content
    report = ingest([docs], index)  # no embedder given: loading one would fail the test
    assert not report.written and report.unchanged == 4 and report.embedded_chunks == 0
    assert live(index) == before


def test_changed_file_is_the_only_one_reembedded(docs, tmp_path, fake):
    index = tmp_path / "index"
    ingest([docs], index, embedder=fake)
    with open(docs / "munge-keys.txt", "a") as handle:
        handle.write("\nKeys live in a vault; fetch them with the ops-secrets tool.\n")
    spy = FakeEmbedder()
    report = ingest([docs], index, embedder=spy)
    assert [Path(p).name for p in report.updated] == ["munge-keys.txt"]
    assert report.added == [] and report.removed == [] and report.unchanged == 3
    assert spy.embedded and all(text.startswith("munge-keys") for text in spy.embedded)
    retriever = open_index(index, FakeEmbedder())
    assert "ops-secrets" in retriever.bm25.retrieve("vault ops-secrets", k=1)[0].text
    assert report.chunks == len(retriever.index.chunks)


def test_files_read_by_an_older_reader_are_read_again_and_only_they(docs, tmp_path, fake, monkeypatch):
    from retrieval import loaders

    index = tmp_path / "index"
    ingest([docs], index, embedder=fake)
    entry = read_manifest(current_generation(index))["files"][str(docs.resolve() / "html" / "backup.html")]
    assert entry["reader"] == loaders.reader_revision("html") and entry["kind"] == "html"
    monkeypatch.setitem(loaders.READER_REVISIONS, "html", loaders.reader_revision("html") + 1)  # the reader changed
    spy = FakeEmbedder()
    report = ingest([docs], index, embedder=spy)
    assert [Path(p).name for p in report.updated] == ["backup.html"] and report.unchanged == 3
    assert report.written and spy.embedded == []  # read again, same text: its stored vectors are kept
    assert not ingest([docs], index, embedder=FakeEmbedder()).written  # and then it is up to date


def test_files_now_read_by_another_reader_are_read_again(docs, tmp_path, fake, monkeypatch):
    from retrieval import loaders

    index = tmp_path / "index"
    monkeypatch.setitem(loaders.KINDS, ".rst", "text")  # how .rst files were read before the rst reader
    ingest([docs], index, embedder=fake)
    rst = str(next(docs.resolve().rglob("gpu-drain.rst")))
    assert read_manifest(current_generation(index))["files"][rst]["kind"] == "text"
    monkeypatch.undo()
    report = ingest([docs], index, embedder=FakeEmbedder())
    assert [Path(p).name for p in report.updated] == ["gpu-drain.rst"] and report.unchanged == 3
    entry = read_manifest(current_generation(index))["files"][rst]
    assert entry["kind"] == "rst" and entry["title"] == "Draining a GPU node"


def test_an_edit_reembeds_only_the_chunks_it_changed_and_a_new_precision_all(tmp_path, fake):
    docs = tmp_path / "docs"
    docs.mkdir()
    paragraphs = [f"Step {i}: the operator checks gauge {i} and writes its reading in the log." for i in range(40)]
    (docs / "long.md").write_text("# Long runbook\n\n" + "\n\n".join(paragraphs) + "\n")
    index = tmp_path / "index"
    first = ingest([docs], index, IngestOptions(chunk_tokens=40, overlap_tokens=0), embedder=fake)
    assert first.chunks > 10
    paragraphs[20] = "Step 20: the operator resets breaker B7 and writes its reading in the log."  # as many tokens
    (docs / "long.md").write_text("# Long runbook\n\n" + "\n\n".join(paragraphs) + "\n")
    spy = FakeEmbedder()
    report = ingest([docs], index, embedder=spy)
    assert [Path(p).name for p in report.updated] == ["long.md"]
    assert 1 <= report.embedded_chunks == len(spy.embedded) <= 2 and any("breaker B7" in t for t in spy.embedded)
    retriever = open_index(index, FakeEmbedder())
    assert report.chunks == first.chunks == len(retriever.index.chunks)
    for chunk, vector in zip(retriever.index.chunks, retriever.index.vectors, strict=True):
        assert np.allclose(vector, spy.vector(chunk.indexed_text()))  # reused or new, each row its own text's
    (docs / "long.md").rename(docs / "renamed.md")  # a moved file: its chunks' texts are stored already
    moved = ingest([docs], index, embedder=FakeEmbedder())
    assert moved.removed and moved.added and moved.embedded_chunks == 0 and moved.chunks == first.chunks
    (docs / "renamed.md").rename(docs / "long.md")
    paragraphs[0] = "Step 0: the operator starts at the north panel."
    (docs / "long.md").write_text("# Long runbook\n\n" + "\n\n".join(paragraphs) + "\n")
    other = FakeEmbedder()
    other.precision = "bfloat16"  # vectors of another precision are not mixed with the stored ones
    assert ingest([docs], index, embedder=other).embedded_chunks == first.chunks


def test_removed_file_loses_its_chunks_and_roots_are_remembered(docs, tmp_path, fake):
    index = tmp_path / "index"
    ingest([docs], index, embedder=fake)
    (docs / "gpu-drain.rst").unlink()
    (docs / "new-note.md").write_text("# Node health check\n\nNHC runs every five minutes on each node.\n")
    spy = FakeEmbedder()
    # no PATH: refresh the roots the index tracks (allowed for roots under a configured default place)
    report = ingest([], index, IngestOptions(trusted_roots=(docs,)), embedder=spy)
    assert [Path(p).name for p in report.removed] == ["gpu-drain.rst"]
    assert [Path(p).name for p in report.added] == ["new-note.md"]
    assert all(t.startswith("Node health check") for t in spy.embedded)
    assert sources(index) == {"runbook-slurmctld.md", "munge-keys.txt", "backup.html", "new-note.md"}


def test_second_root_is_added_to_the_first(docs, tmp_path, fake):
    index, extra = tmp_path / "index", tmp_path / "extra"
    extra.mkdir()
    (extra / "pager.txt").write_text("Page the on-call admin when the scheduler is down for ten minutes.\n")
    ingest([docs], index, embedder=fake)
    report = ingest([extra], index, embedder=FakeEmbedder())
    assert [Path(p).name for p in report.added] == ["pager.txt"] and report.unchanged == 4
    assert "pager.txt" in sources(index) and "backup.html" in sources(index)


def test_vanished_root_is_dropped(docs, tmp_path, fake):
    index, extra = tmp_path / "index", tmp_path / "extra"
    extra.mkdir()
    (extra / "pager.txt").write_text("Page the on-call admin.\n")
    ingest([docs, extra], index, embedder=fake)
    (extra / "pager.txt").unlink()
    extra.rmdir()
    report = ingest([docs], index, embedder=FakeEmbedder())
    assert report.dropped_roots == [str(extra.resolve())]
    assert [Path(p).name for p in report.removed] == ["pager.txt"]
    assert read_manifest(current_generation(index))["roots"] == [str(docs.resolve())]


def test_bad_files_are_skipped_with_reasons_and_the_rest_indexed(docs, tmp_path, fake, pdf_maker):
    (docs / "empty.md").write_bytes(b"")
    (docs / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    (docs / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (docs / "huge.md").write_text("x " * 6000)
    good_pdf = pdf_maker(docs / "manual.pdf", ["Drain nodes before a firmware update."], "Firmware").read_bytes()
    (docs / "broken.pdf").write_bytes(good_pdf[:200])
    report = ingest([docs], tmp_path / "index", IngestOptions(max_file_bytes=10_000), embedder=fake)
    reasons = {Path(s["path"]).name: s["reason"] for s in report.skipped}
    assert set(reasons) == {"empty.md", "binary.txt", "latin1.txt", "huge.md", "broken.pdf"}
    assert "too large" in reasons["huge.md"] and "UTF-8" in reasons["latin1.txt"]
    assert "manual.pdf" in {Path(p).name for p in report.added}
    summary = report.summary()
    assert "5 skipped" in summary and "broken.pdf" in summary


def test_a_file_that_turns_bad_loses_its_old_chunks(docs, tmp_path, fake):
    index = tmp_path / "index"
    ingest([docs], index, embedder=fake)
    (docs / "munge-keys.txt").write_bytes(b"\xff\xfe garbage \x00")
    report = ingest([docs], index, embedder=FakeEmbedder())
    assert [Path(p).name for p in report.removed] == ["munge-keys.txt"]
    assert [Path(s["path"]).name for s in report.skipped] == ["munge-keys.txt"]
    assert "munge-keys.txt" not in sources(index)


def test_only_bad_files_write_no_index(tmp_path, fake):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "empty.md").write_bytes(b"")
    report = ingest([folder], tmp_path / "index", embedder=fake)
    assert not report.written and report.chunks == 0 and fake.embedded == []
    assert current_generation(tmp_path / "index") is None
    # a page that reads but holds nothing to index (a title alone) leaves no empty index either: a search of one
    # said "no results" and the copilot "the sources do not cover this", where there were no sources at all
    (folder / "title-only.md").write_text("# Draining nodes\n")
    report = ingest([folder], tmp_path / "index", embedder=fake)
    assert not report.written and report.chunks == 0 and fake.embedded == []
    assert "no text to index" in [s["reason"] for s in report.skipped]
    assert current_generation(tmp_path / "index") is None


def test_missing_path_is_an_error_before_anything_happens(tmp_path, fake):
    with pytest.raises(RetrievalError, match="does not exist"):
        ingest([tmp_path / "nope"], tmp_path / "index", embedder=fake)
    assert not (tmp_path / "index").exists()


def test_index_inside_the_corpus_is_not_ingested(docs, fake):
    index = docs / "index"
    ingest([docs], index, embedder=fake)
    report = ingest([docs], index, embedder=FakeEmbedder())
    assert not report.written and report.skipped == []


def test_hidden_files_and_folders_are_ignored(docs, tmp_path, fake):
    (docs / ".git").mkdir()
    (docs / ".git" / "notes.md").write_text("# hidden\n\nshould not be indexed\n")
    (docs / ".draft.md").write_text("# draft\n\nnot yet\n")
    report = ingest([docs], tmp_path / "index", embedder=fake)
    assert {Path(p).name for p in report.added} == {
        "runbook-slurmctld.md",
        "munge-keys.txt",
        "gpu-drain.rst",
        "backup.html",
    }
