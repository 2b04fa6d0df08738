"""Fault injection, one test per defect of issue 12, each asserting the outcome: no data loss,
a one-line message that says what to do (exit code 2 from the CLI), and no traceback.

The embedder is the fake one everywhere (every_model_load_gives patches where the CLI would load the
real model), so every case runs in well under a second.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from retrieval_fakes import FakeEmbedder, every_model_load_gives

from app.cli import main
from retrieval import scan as scan_module
from retrieval.embeddings import DEFAULT_MODEL_NAME
from retrieval.errors import IndexCorruptError, IndexMismatchError, RetrievalError
from retrieval.index import CHUNKS, VECTORS, load_rows
from retrieval.ingest import IngestOptions, ingest
from retrieval.manifest import MANIFEST, file_sha256
from retrieval.retriever import open_index
from retrieval.store import CURRENT, LOCK, MARKER

DEFAULT = DEFAULT_MODEL_NAME


def fake() -> FakeEmbedder:
    return FakeEmbedder(DEFAULT, dim=64)


@pytest.fixture
def no_real_model(monkeypatch):
    """The CLI's model loads get the fake embedder, under the default model's name."""
    every_model_load_gives(monkeypatch, fake)


@pytest.fixture
def no_model_at_all(monkeypatch):
    def refuse():
        raise AssertionError("a model was loaded")

    every_model_load_gives(monkeypatch, refuse)


@pytest.fixture
def index(docs, tmp_path) -> Path:
    index_dir = tmp_path / "index"
    ingest([docs], index_dir, embedder=fake())
    return index_dir


def live(index_dir: Path) -> Path:
    return index_dir / (index_dir / CURRENT).read_text().strip()


def generations(index_dir: Path) -> list[str]:
    return sorted(p.name for p in index_dir.iterdir() if p.name.startswith("gen-"))


def cli(capsys, *argv: str) -> tuple[int, str]:
    """Exit code and stderr of `specrag argv...`; asserts the stderr is at most one message line."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:
        lines = [line for line in err.splitlines() if line.startswith("specrag: error:")]
        assert len(lines) == 1, err
    return code, err


def search_ok(index_dir: Path) -> None:
    hits = open_index(index_dir, fake()).retrieve("rotate the munge key", k=3)
    assert any("munge-keys.txt" in h.source for h in hits)


# --- 1. user data deleted -------------------------------------------------------------------------


def test_folder_of_user_gen_dirs_is_refused_untouched(docs, tmp_path, capsys, no_model_at_all):
    user = tmp_path / "mine"
    for name in ("gen-2024-photos", "gen-drafts"):
        (user / name).mkdir(parents=True)
        (user / name / "keep.jpg").write_bytes(b"precious")
    code, err = cli(capsys, "ingest", docs, "--index", user)
    assert code == 2 and "not a specrag index" in err and "choose an empty or new folder" in err
    assert sorted(p.name for p in user.iterdir()) == ["gen-2024-photos", "gen-drafts"]  # and no .lock
    assert (user / "gen-drafts" / "keep.jpg").read_bytes() == b"precious"


def test_user_folder_inside_an_index_is_never_deleted(docs, index):
    (index / "gen-user-notes").mkdir()
    (index / "gen-user-notes" / "todo.txt").write_text("mine")
    (docs / "munge-keys.txt").write_text("Rotate the munge key every quarter.\n")
    assert ingest([docs], index, embedder=fake()).written
    assert (index / "gen-user-notes" / "todo.txt").read_text() == "mine"
    assert generations(index) == sorted(["gen-user-notes", live(index).name])


def test_missing_current_next_to_an_intact_generation_is_recovered_not_dropped(docs, index, capsys):
    before = live(index)
    (index / CURRENT).unlink()
    with pytest.raises(IndexCorruptError, match=f"{before.name} is intact; restore it with: specrag ingest"):
        open_index(index, fake())
    (docs / "extra.md").write_text("# Pager\n\nPage the on-call admin.\n")
    report = ingest([docs], index, embedder=fake())
    assert any("missing" in note and before.name in note for note in report.notes)
    assert report.unchanged == 4 and [Path(p).name for p in report.added] == ["extra.md"]
    search_ok(index)


# --- 2. readers pin what they read (more in test_concurrency.py) ------------------------------------


def test_pinned_generation_outlives_an_ingest_and_goes_when_released(docs, index):
    from retrieval.store import pin_live, sweep

    old = live(index)
    lease = pin_live(index)
    (docs / "munge-keys.txt").write_text("Rotate the munge key monthly.\n")
    ingest([docs], index, embedder=fake())
    assert old.is_dir() and live(index) != old  # still readable by the pinning reader
    assert load_rows(old, 64)[0]
    lease.release()
    sweep(index)
    assert generations(index) == [live(index).name]


# --- 3. vectors joined by id, damage caught ----------------------------------------------------------


def drop_first_chunk_line(generation: Path) -> None:
    path = generation / CHUNKS
    path.write_text("".join(path.read_text().splitlines(keepends=True)[1:]))


def test_lost_chunk_line_is_damage_for_search_and_ingest_and_rebuild_repairs(docs, index):
    damaged = live(index)
    drop_first_chunk_line(damaged)
    with pytest.raises(IndexCorruptError, match=r"damaged.*chunks.jsonl.*--rebuild"):
        open_index(index, fake())
    (docs / "munge-keys.txt").write_text("Rotate the munge key monthly.\n")
    with pytest.raises(IndexCorruptError, match="--rebuild"):
        ingest([docs], index, embedder=fake())  # never writes a generation from misaligned rows
    assert generations(index) == [damaged.name]
    assert ingest([], index, IngestOptions(rebuild=True, trusted_roots=(docs,)), embedder=fake()).written
    search_ok(index)
    assert generations(index) == [live(index).name]


def test_chunks_meet_their_vectors_by_id_not_by_position(index):
    generation = live(index)
    lines = (generation / CHUNKS).read_text().splitlines(keepends=True)
    (generation / CHUNKS).write_text("".join(reversed(lines)))  # same rows, other order
    chunks, vectors = load_rows(generation, 64)
    embedder = fake()
    for chunk, vector in zip(chunks, vectors, strict=True):
        assert np.allclose(vector, embedder.vector(chunk.indexed_text()))


def test_vectors_without_their_ids_are_refused(index):
    generation = live(index)
    lines = (generation / CHUNKS).read_text().splitlines(keepends=True)
    (generation / CHUNKS).write_text("".join(lines[1:]))
    with pytest.raises(IndexCorruptError, match="chunks"):
        load_rows(generation, 64)


# --- 4. recovery advice that works ---------------------------------------------------------------


@pytest.mark.parametrize("pointer", ["garbage\x00\xff", "", "gen-20990101T000000-deadbeef", None])
def test_rebuild_works_whatever_the_pointer_says(docs, index, capsys, no_real_model, pointer):
    if pointer is None:
        (index / CURRENT).unlink()
    else:
        (index / CURRENT).write_text(pointer)
    shutil.rmtree(live_or_only(index) / "bm25")  # and the generation itself is damaged
    code, err = cli(capsys, "search", "munge", "--index", index)
    assert code == 2 and "--rebuild" in err and str(docs.resolve()) in err  # the hint names the roots
    code, err = cli(capsys, "ingest", docs, "--index", index, "--rebuild", "--quiet")
    assert code == 0, err
    assert cli(capsys, "search", "munge key", "--index", index)[0] == 0
    assert generations(index) == [live(index).name]


def live_or_only(index_dir: Path) -> Path:
    return index_dir / generations(index_dir)[0]


# --- 5. boundaries ---------------------------------------------------------------------------------


def test_symlinks_out_of_the_folder_are_skipped_and_reported(docs, tmp_path):
    (tmp_path / "secret.md").write_text("# Secret\n\nThe root password is hunter2.\n")
    (docs / "innocent.md").symlink_to(tmp_path / "secret.md")
    (docs / "host.txt").symlink_to("/etc/hostname")
    (docs / "inside.md").symlink_to(docs / "runbook-slurmctld.md")  # stays inside: fine
    report = ingest([docs], tmp_path / "index", embedder=fake())
    reasons = {Path(s["path"]).name: s["reason"] for s in report.skipped}
    assert "--follow-symlinks" in reasons["innocent.md"] and "--follow-symlinks" in reasons["host.txt"]
    assert "inside.md" in {Path(p).name for p in report.added}
    assert not open_index(tmp_path / "index", fake()).bm25.retrieve("hunter2 root password", k=3)
    followed = ingest([docs], tmp_path / "index2", IngestOptions(follow_symlinks=True), embedder=fake())
    assert "innocent.md" in {Path(p).name for p in followed.added}


def edit_manifest(generation: Path, **changes) -> None:
    manifest = json.loads((generation / MANIFEST).read_text())
    for dotted, value in changes.items():
        target = manifest
        *parents, key = dotted.split("__")
        for name in parents:
            target = target[name]
        if value is None:
            del target[key]
        else:
            target[key] = value
    (generation / MANIFEST).write_text(json.dumps(manifest))


def test_edited_manifest_root_is_not_read_by_a_bare_ingest(docs, index, tmp_path, capsys, no_model_at_all):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.md").write_text("# Private\n\nSalary table.\n")
    edit_manifest(live(index), roots=[str(docs.resolve()), str(outside)])
    code, err = cli(capsys, "ingest", "--index", index)
    assert code == 2 and "you did not name" in err and f"{outside} --index {index}" in err
    report = ingest([docs], index, embedder=fake())  # naming docs: outside is kept, never read
    assert report.kept_roots == [str(outside)] and not any("private" in p for p in report.added)


def test_manifest_model_path_is_not_loaded_unless_named(docs, index, tmp_path, capsys, no_model_at_all):
    crafted = tmp_path / "crafted-model"
    crafted.mkdir()
    edit_manifest(live(index), embedding__model=str(crafted))
    code, err = cli(capsys, "search", "munge", "--index", index)
    assert code == 2 and f"--model {crafted}" in err
    (docs / "munge-keys.txt").write_text("Rotate the munge key monthly.\n")
    with pytest.raises(IndexMismatchError, match=f"--model {crafted}"):
        ingest([docs], index)


# --- 6. messages, not tracebacks ----------------------------------------------------------------------


@pytest.mark.parametrize("k", ["0", "-1"])
def test_bad_k_is_refused_before_any_model_load(index, capsys, no_model_at_all, k):
    code, err = cli(capsys, "search", "munge", "-k", k, "--index", index)
    assert code == 2 and "-k must be at least 1" in err


@pytest.mark.parametrize(
    ("payload", "expected"),
    [(b"", "vectors.npy"), (os.urandom(4096), "vectors.npy")],
    ids=["empty", "random-bytes"],
)
def test_damaged_vectors_file_gives_a_message(index, capsys, no_real_model, payload, expected):
    (live(index) / VECTORS).write_bytes(payload)
    code, err = cli(capsys, "search", "munge", "--index", index)
    assert code == 2 and expected in err and "--rebuild" in err and "allow_pickle" not in err


def test_unreadable_vectors_say_damaged_even_past_the_checksums(index):
    (live(index) / VECTORS).write_bytes(os.urandom(4096))
    with pytest.raises(IndexCorruptError) as caught:
        load_rows(live(index), 64)  # what the checksums guard, read directly
    assert "damaged" in str(caught.value) and "allow_pickle" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [({"embedding": None}, "embedding.model is missing"), ({"embedding__dim": "64"}, "embedding.dim is '64'")],
    ids=["missing-keys", "dim-is-a-string"],
)
def test_broken_manifest_fields_give_a_message(index, capsys, no_real_model, change, expected):
    edit_manifest(live(index), **change)
    code, err = cli(capsys, "search", "munge", "--index", index)
    assert code == 2 and expected in err and "--rebuild" in err


def test_index_that_is_a_file_gives_a_message(tmp_path, capsys, no_model_at_all):
    (tmp_path / "notes.txt").write_text("hi")
    code, err = cli(capsys, "search", "munge", "--index", tmp_path / "notes.txt")
    assert code == 2 and "is a file" in err


@pytest.mark.parametrize("flags", [("--chunk-tokens", "5"), ("--overlap-tokens", "150"), ("--max-file-mb", "0")])
def test_impossible_ingest_options_are_refused_first(docs, tmp_path, capsys, no_model_at_all, flags):
    code, err = cli(capsys, "ingest", docs, "--index", tmp_path / "index", *flags)
    assert code == 2 and flags[0] in err
    assert not (tmp_path / "index").exists()


def test_manifest_is_checked_even_if_only_the_marker_survives(docs, index):
    (index / MARKER).write_text("not json")  # the history is rebuilt from our own manifests
    assert not ingest([docs], index, embedder=fake()).written
    assert json.loads((index / MARKER).read_text())["generations"] == [live(index).name]


# --- 7. big files and silent skips --------------------------------------------------------------------


def test_one_large_file_shows_progress(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("retrieval.ingest.PROGRESS_MIN_BYTES", 256 * 1024)  # 4 MB in real use
    docs = tmp_path / "big"
    docs.mkdir()
    (docs / "huge.txt").write_text("Drain the node before the GPU swap.\n\n" * 16_000)  # ~600 KB, 3 blocks
    ingest([docs], tmp_path / "index", IngestOptions(progress=True), embedder=fake())
    assert "chunking" in capsys.readouterr().err


def test_unreadable_folder_is_reported(docs, tmp_path, monkeypatch):
    locked = docs / "locked"
    locked.mkdir()
    (locked / "note.md").write_text("# Note\n\nHidden.\n")
    real_scandir = os.scandir

    def scandir(path):
        if Path(path) == locked:  # as root, chmod 000 would not stop us; simulate it
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(scan_module.os, "scandir", scandir)
    report = ingest([docs], tmp_path / "index", embedder=fake())
    assert {"path": str(locked), "reason": "unreadable folder (Permission denied); check its permissions"} in (
        report.skipped
    )
    assert "unreadable folder" in report.summary()


def test_nothing_to_refresh_and_no_lock_left_in_refused_dirs(tmp_path, capsys, no_model_at_all):
    user = tmp_path / "photos"
    user.mkdir()
    (user / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(RetrievalError):
        ingest([tmp_path / "does-not-exist"], user)
    with pytest.raises(IndexMismatchError):
        ingest([user], user)
    assert not (user / LOCK).exists()


def test_index_from_before_the_marker_is_adopted_and_rebuilt(docs, index, capsys, no_real_model):
    old = live(index)
    (index / MARKER).unlink()  # as written by specrag before this change: format 1, no marker
    edit_manifest(old, version=1)
    code, err = cli(capsys, "search", "munge", "--index", index)
    assert code == 2 and "format 1" in err and f"specrag ingest {docs.resolve()} --index {index} --rebuild" in err
    assert cli(capsys, "ingest", docs, "--index", index, "--rebuild", "--quiet")[0] == 0
    assert generations(index) == [live(index).name] != [old.name]
    search_ok(index)


def test_checksums_cover_every_data_file(index):
    manifest = json.loads((live(index) / MANIFEST).read_text())
    names = set(manifest["checksums"])
    assert {CHUNKS, VECTORS, "vector_ids.json"} <= names and any(n.startswith("bm25/") for n in names)
    assert manifest["checksums"][CHUNKS] == file_sha256(live(index) / CHUNKS)
