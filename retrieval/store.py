"""The index directory on disk: who owns it, which generation is live, and who may delete what.

    INDEX_DIR/
      specrag-index.json      the ownership marker: format, version and every generation this
                              index created, oldest first (its history)
      CURRENT                 one line: the name of the live generation
      gen-<stamp>-<rand>/     manifest.json, chunks.jsonl, vectors.npy, vector_ids.json, bm25/, lease
      .lock                   held by a running ingest

A directory is an index because of its marker, never because of the names of its entries:
a non-empty folder without one is refused untouched. Only generations named in the history are
ever deleted, and only when no reader pins them (lease.py). A writer records a generation in the
history before creating it, fills it, fsyncs it, then replaces CURRENT in one atomic rename.
Readers sweep the generations that precede the live one in the history when they unpin, so the
last reader of an old generation removes it. Nothing here is pickled.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.atomic import fsync_dir, write_atomic
from core.paths import cache_root
from retrieval.errors import IndexBusyError, IndexCorruptError, IndexMismatchError, IndexNotFoundError, RetrievalError
from retrieval.lease import Lease, create_lease, pin, remove_if_unpinned, trash_of
from retrieval.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    IndexSettings,
    check_manifest,
    checksums,
    load_manifest,
    manifest_for,
    roots_of,
    settings_of,
    verify_checksums,
)

__all__ = ["MANIFEST", "IndexSettings", "manifest_for", "settings_of"]

CURRENT = "CURRENT"
MARKER = "specrag-index.json"
LOCK = ".lock"
PIN_ATTEMPTS = 20  # each failed attempt means an ingest swapped generations in between


def default_index_dir() -> Path:
    """The `index` folder under the cache root ($SPECRAG_HOME, else ~/.cache/specrag)."""
    return cache_root() / "index"


def rebuild_hint(index_dir: Path, roots: list[str] | None = None) -> str:
    paths = " ".join(roots) if roots else "PATH..."
    return f"rebuild it with: specrag ingest {paths} --index {index_dir} --rebuild"


# --- ownership ------------------------------------------------------------------------------------


def inspect(index_dir: Path) -> list[str] | None:
    """The generations this index created (oldest first), or None for a missing or empty folder.

    Refuses a file, and a non-empty folder that carries neither our marker nor a generation whose
    manifest says specrag wrote it (an index made before the marker existed is adopted that way).
    """
    if index_dir.exists() and not index_dir.is_dir():
        raise IndexNotFoundError(f"{index_dir} is a file, not an index folder; pass a folder to --index")
    if not index_dir.exists():
        return None
    history = _read_marker(index_dir)
    if history is not None:
        return history
    entries = sorted(p.name for p in index_dir.iterdir() if p.name != LOCK)
    adopted = [name for name in entries if _made_by_specrag(index_dir / name)]
    if adopted:
        return adopted
    if entries:
        raise IndexMismatchError(
            f"{index_dir} is not a specrag index and not empty (it holds {entries[0]!r}); "
            "choose an empty or new folder for --index"
        )
    return None


def _read_marker(index_dir: Path) -> list[str] | None:
    try:
        marker = json.loads((index_dir / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("format") != FORMAT:
        return None
    history = marker.get("generations")
    if not isinstance(history, list) or not all(isinstance(n, str) and _is_name(n) for n in history):
        return None
    return history


def _is_name(name: str) -> bool:
    return name.startswith("gen-") and "/" not in name and name not in (".", "..")


def _made_by_specrag(path: Path) -> bool:
    try:
        load_manifest(path)
    except IndexCorruptError:
        return False
    return _is_name(path.name)


def write_marker(index_dir: Path, history: list[str]) -> None:
    marker = {"format": FORMAT, "version": FORMAT_VERSION, "generations": history}
    write_atomic(index_dir / MARKER, json.dumps(marker, indent=1) + "\n")


# --- the live generation ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    """The generation to serve; `problem` says why CURRENT itself could not be used (then
    `generation` is the newest intact one, or None)."""

    generation: Path | None
    problem: str | None = None


def find_live(index_dir: Path, history: list[str]) -> Live:
    name, problem = _pointer(index_dir)
    if name is not None and name in history and (index_dir / name / MANIFEST).is_file():
        return Live(index_dir / name)
    if problem is None:
        problem = f"{index_dir / CURRENT} names {name!r}, which is not a generation of this index"
    return Live(newest_intact(index_dir, history), problem)


def _pointer(index_dir: Path) -> tuple[str | None, str | None]:
    try:
        name = (index_dir / CURRENT).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None, f"{index_dir / CURRENT} is missing"
    except (OSError, UnicodeDecodeError):
        return None, f"{index_dir / CURRENT} is unreadable"
    if not name:
        return None, f"{index_dir / CURRENT} is empty"
    return name, None


def newest_intact(index_dir: Path, history: list[str]) -> Path | None:
    for name in reversed(history):
        try:
            check_generation(index_dir / name)
        except RetrievalError:
            continue
        return index_dir / name
    return None


def check_generation(generation: Path) -> dict:
    """The generation's manifest after checking its version, fields and file checksums."""
    manifest = check_manifest(load_manifest(generation), generation)
    verify_checksums(generation, manifest)
    return manifest


def known_roots(index_dir: Path, history: list[str]) -> list[str]:
    """Roots of the newest generation whose manifest can still be read (any version)."""
    for name in reversed(history):
        try:
            return roots_of(load_manifest(index_dir / name))
        except IndexCorruptError:
            continue
    return []


def require_live(index_dir: Path) -> Path:
    """The live generation for a reader, or an error that says how to get one."""
    history = inspect(index_dir)
    if not history:
        raise IndexNotFoundError(f"no index at {index_dir}; build one with: specrag ingest PATH... --index {index_dir}")
    live = find_live(index_dir, history)
    if live.problem is None:
        return live.generation
    roots = known_roots(index_dir, history)
    if live.generation is not None:
        paths = " ".join(roots_of(load_manifest(live.generation))) or "PATH..."
        raise IndexCorruptError(
            f"{live.problem} but generation {live.generation.name} is intact; "
            f"restore it with: specrag ingest {paths} --index {index_dir}"
        )
    raise IndexCorruptError(f"{live.problem} and no intact generation remains; {rebuild_hint(index_dir, roots)}")


def pin_live(index_dir: Path) -> Lease:
    """Pin the live generation; retried when an ingest swaps and deletes it in between."""
    for _ in range(PIN_ATTEMPTS):
        lease = pin(require_live(index_dir))
        if lease is not None:
            return lease
        time.sleep(0.01)
    raise IndexBusyError(f"{index_dir} changed {PIN_ATTEMPTS} times while opening it; try again")


# --- writing ----------------------------------------------------------------------------------------


@contextmanager
def ingest_lock(index_dir: Path) -> Iterator[None]:
    """One writer at a time; the OS drops the lock if the process dies."""
    index_dir.mkdir(parents=True, exist_ok=True)
    with open(index_dir / LOCK, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as err:
            raise IndexBusyError(f"another ingest is writing {index_dir}; wait for it to finish") from err
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_generation(index_dir: Path, history: list[str], manifest: dict, save: Callable[[Path], None]) -> Path:
    """Write a new generation (save() fills it, then the manifest with checksums) and make it live.

    It enters the history before it exists, so a crash leaves nothing we would not recognise.
    On any failure or interrupt the half-written generation is removed and CURRENT is untouched.
    """
    generation = index_dir / f"gen-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
    history.append(generation.name)
    write_marker(index_dir, history)
    generation.mkdir()
    try:
        create_lease(generation)
        save(generation)
        write_json(generation / MANIFEST, {**manifest, "checksums": checksums(generation)})
        fsync_tree(generation)
        repoint(index_dir, generation)
    except BaseException:
        if _pointer(index_dir)[0] != generation.name:
            shutil.rmtree(generation, ignore_errors=True)
        raise
    return generation


def write_json(path: Path, payload: object) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, ensure_ascii=False, indent=1)
        handle.write("\n")


def fsync_tree(root: Path) -> None:
    """Flush every file and directory under root (and root itself) to disk."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            with open(Path(dirpath) / name, "rb") as handle:
                os.fsync(handle.fileno())
        fsync_dir(Path(dirpath))


def repoint(index_dir: Path, generation: Path) -> None:
    """Make generation the live one (one atomic rename of CURRENT)."""
    write_atomic(index_dir / CURRENT, generation.name + "\n")


def clean(index_dir: Path, history: list[str], keep: str) -> list[str]:
    """Writer-side (under the ingest lock): delete every unpinned generation of the history but
    `keep`, finish interrupted deletions, and forget names that are gone. Returns the new history."""
    for name in history:
        if name != keep and (index_dir / name).is_dir():
            remove_if_unpinned(index_dir / name)
        for trash in trash_of(index_dir, name):
            shutil.rmtree(trash, ignore_errors=True)
    for tmp in index_dir.glob(f".{CURRENT}.*.tmp"):  # left by a writer killed mid-rename
        tmp.unlink(missing_ok=True)
    kept = [n for n in history if n == keep or (index_dir / n).exists() or trash_of(index_dir, n)]
    if _read_marker(index_dir) != kept:  # also records a history adopted from our manifests
        write_marker(index_dir, kept)
    return kept


def sweep(index_dir: Path) -> None:
    """Reader-side: remove unpinned generations older than the live one (never a newer one, which
    may be an ingest's work in progress). Safe without the ingest lock."""
    history = _read_marker(index_dir) or []
    name = _pointer(index_dir)[0]
    if name not in history:
        return
    for older in history[: history.index(name)]:
        if (index_dir / older).is_dir():
            remove_if_unpinned(index_dir / older)


# --- compatibility helpers for callers that only need the live generation ----------------------------


def current_generation(index_dir: Path) -> Path | None:
    """The live generation directory, or None if index_dir holds no index yet."""
    try:
        return require_live(index_dir)
    except IndexNotFoundError:
        return None


def require_generation(index_dir: Path) -> Path:
    return require_live(index_dir)


def read_manifest(generation: Path) -> dict:
    """The checked manifest of a generation (version and fields; not the file checksums)."""
    return check_manifest(load_manifest(generation), generation)
