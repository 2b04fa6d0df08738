"""The index directory on disk: generations, the CURRENT pointer, the manifest and the lock.

    INDEX_DIR/
      CURRENT                 one line: the name of the live generation
      gen-<stamp>-<rand>/     manifest.json, chunks.jsonl, vectors.npy, bm25/ (see index.py)
      .lock                   held by a running ingest

An ingest writes a complete new generation beside the live one, fsyncs it, then replaces
CURRENT in one atomic rename. Until that rename, readers (and a crash, Ctrl-C or SIGKILL)
only ever see the previous generation; stale generations are removed by the next ingest.
Nothing here (or in index.py) is pickled: JSON, JSON lines and .npy with allow_pickle=False.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.atomic import fsync_dir
from core.paths import cache_root
from retrieval.errors import IndexBusyError, IndexCorruptError, IndexMismatchError, IndexNotFoundError

FORMAT = "specrag-index"
FORMAT_VERSION = 1
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
LOCK = ".lock"
_GENERATION = re.compile(r"gen-[0-9A-Za-z-]+")


def default_index_dir() -> Path:
    """The `index` folder under the cache root ($SPECRAG_HOME, else ~/.cache/specrag)."""
    return cache_root() / "index"


def rebuild_hint(index_dir: Path) -> str:
    return f"rebuild it with: specrag ingest PATH... --index {index_dir} --rebuild (or use another --index)"


@dataclass(frozen=True)
class IndexSettings:
    """What must match between an index and the code that extends or queries it."""

    model: str  # manifest id: the default model's name or an absolute model directory
    dim: int
    chunk_tokens: int
    overlap_tokens: int


def settings_of(manifest: dict) -> IndexSettings:
    emb, chunking = manifest["embedding"], manifest["chunking"]
    return IndexSettings(emb["model"], emb["dim"], chunking["chunk_tokens"], chunking["overlap_tokens"])


def manifest_for(
    settings: IndexSettings, roots: list[str], files: dict[str, dict], chunks: int, precision: str = "float32"
) -> dict:
    """precision is recorded for information only (bf16 and fp32 MiniLM vectors agree to >= 0.998 cosine)."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "embedding": {"model": settings.model, "dim": settings.dim, "normalized": True, "precision": precision},
        "chunking": {"chunk_tokens": settings.chunk_tokens, "overlap_tokens": settings.overlap_tokens},
        "roots": roots,
        "chunks": chunks,
        "files": files,
    }


# --- reading ----------------------------------------------------------------------------------


def current_generation(index_dir: Path) -> Path | None:
    """The live generation directory, or None if index_dir holds no index yet."""
    name = _live_name(index_dir)
    if name is None:
        return None
    pointer = index_dir / CURRENT
    if not _GENERATION.fullmatch(name) or not (index_dir / name / MANIFEST).is_file():
        raise IndexCorruptError(f"{pointer} names a missing generation {name!r}; {rebuild_hint(index_dir)}")
    return index_dir / name


def _live_name(index_dir: Path) -> str | None:
    try:
        return (index_dir / CURRENT).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def require_generation(index_dir: Path) -> Path:
    generation = current_generation(index_dir)
    if generation is None:
        raise IndexNotFoundError(f"no index at {index_dir}; build one with: specrag ingest PATH... --index {index_dir}")
    return generation


def read_manifest(generation: Path) -> dict:
    """The manifest, checked for format and version (a mismatch says how to rebuild)."""
    index_dir = generation.parent
    try:
        manifest = json.loads((generation / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IndexCorruptError(f"cannot read {generation / MANIFEST} ({err}); {rebuild_hint(index_dir)}") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IndexMismatchError(f"{index_dir} is not a specrag index; {rebuild_hint(index_dir)}")
    if manifest.get("version") != FORMAT_VERSION:
        raise IndexMismatchError(
            f"{index_dir} uses index format {manifest.get('version')}, this specrag reads {FORMAT_VERSION}; "
            + rebuild_hint(index_dir)
        )
    return manifest


def check_is_index_dir(index_dir: Path) -> None:
    """Refuse to write into a non-empty directory that is not ours (we would never delete its files,
    but mixing them with an index is a mistake worth stopping)."""
    if index_dir.is_file():
        raise IndexNotFoundError(f"{index_dir} is a file, not an index directory; choose another --index")
    if index_dir.is_dir() and not (index_dir / CURRENT).exists():
        foreign = [p.name for p in index_dir.iterdir() if p.name != LOCK and not _GENERATION.fullmatch(p.name)]
        if foreign:
            raise IndexMismatchError(
                f"{index_dir} exists and is not a specrag index (it holds {foreign[0]!r}); choose another --index"
            )


# --- writing ----------------------------------------------------------------------------------


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


def write_generation(index_dir: Path, manifest: dict, save: Callable[[Path], None]) -> Path:
    """Write a new generation (save() fills it, then the manifest) and make it the live one.

    On any failure or interrupt the half-written generation is removed and CURRENT is untouched.
    """
    generation = index_dir / f"gen-{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
    generation.mkdir()
    try:
        save(generation)
        write_json(generation / MANIFEST, manifest)
        publish(index_dir, generation)
    except BaseException:
        if _live_name(index_dir) != generation.name:
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


def publish(index_dir: Path, generation: Path) -> None:
    """Point CURRENT at a fully written generation (atomic rename), then drop stale generations."""
    fsync_tree(generation)
    tmp = index_dir / f".{CURRENT}.{secrets.token_hex(4)}"
    tmp.write_text(generation.name + "\n", encoding="utf-8")
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, index_dir / CURRENT)
    fsync_dir(index_dir)
    remove_stale(index_dir, keep=generation.name)


def remove_stale(index_dir: Path, keep: str | None) -> None:
    """Delete generations other than `keep` (left by older ingests or by crashed ones)."""
    for path in index_dir.iterdir():
        if path.is_dir() and _GENERATION.fullmatch(path.name) and path.name != keep:
            shutil.rmtree(path, ignore_errors=True)
        elif path.name.startswith(f".{CURRENT}."):
            path.unlink(missing_ok=True)
