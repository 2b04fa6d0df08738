"""A generation's manifest: what built it, what it holds, and the checksums that prove it intact.

    {"format": "specrag-index", "version": 2, "updated": ...,
     "embedding": {"model", "dim", "normalized", "precision"},
     "chunking": {"chunk_tokens", "overlap_tokens"},
     "roots": [...], "chunks": N, "files": {path: {"sha256", "kind", "reader", "title", "chunks"}},
     "checksums": {relative file path: sha256, for every data file of the generation}}

Every field is type-checked on read, so a damaged or hand-edited manifest is reported as such
instead of failing later with a KeyError or a self-contradicting message. Checksums cover
chunks.jsonl, vectors.npy, vector_ids.json and the BM25 files; they are checked on every open.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import IndexCorruptError, IndexMismatchError

FORMAT = "specrag-index"
FORMAT_VERSION = 2  # 2: checksums, vector ids and reader leases
MANIFEST = "manifest.json"
NOT_DATA = {MANIFEST, "lease"}  # files of a generation that the checksums do not cover


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


# --- reading and checking -------------------------------------------------------------------------


def load_manifest(generation: Path) -> dict:
    """The parsed manifest of any format version (for its roots); raises IndexCorruptError."""
    try:
        manifest = json.loads((generation / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IndexCorruptError(f"cannot read {generation / MANIFEST} ({_reason(err)})") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IndexCorruptError(f"{generation / MANIFEST} is not a specrag manifest")
    return manifest


def check_manifest(manifest: dict, generation: Path) -> dict:
    """The manifest if this specrag can use it: the right version and every field well typed."""
    if manifest.get("version") != FORMAT_VERSION:
        raise IndexMismatchError(
            f"{generation.parent} uses index format {manifest.get('version')!r}, this specrag reads {FORMAT_VERSION}"
        )
    problem = _first_problem(manifest)
    if problem:
        raise IndexCorruptError(f"{generation / MANIFEST} is damaged ({problem})")
    return manifest


def roots_of(manifest: dict) -> list[str]:
    roots = manifest.get("roots")
    return roots if isinstance(roots, list) and all(isinstance(r, str) for r in roots) else []


_SCHEMA: dict[str, type | tuple[type, ...]] = {
    "embedding.model": str,
    "embedding.dim": int,
    "chunking.chunk_tokens": int,
    "chunking.overlap_tokens": int,
    "roots": list,
    "chunks": int,
    "files": dict,
    "checksums": dict,
}


def _first_problem(manifest: dict) -> str | None:
    for dotted, kind in _SCHEMA.items():
        value: object = manifest
        for key in dotted.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return f"{dotted} is missing"
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"{dotted} is {value!r}, expected {'an integer' if kind is int else kind.__name__}"
        if kind is int and value < 0:
            return f"{dotted} is negative"
    if manifest["embedding"]["dim"] == 0:
        return "embedding.dim is 0"
    if not all(isinstance(r, str) for r in manifest["roots"]):
        return "roots holds a non-string"
    return None


# --- checksums ------------------------------------------------------------------------------------


def checksums(generation: Path) -> dict[str, str]:
    """sha256 of every data file in the generation, by path relative to it."""
    return {
        path.relative_to(generation).as_posix(): file_sha256(path)
        for path in sorted(generation.rglob("*"))
        if path.is_file() and path.relative_to(generation).as_posix() not in NOT_DATA
    }


def verify_checksums(generation: Path, manifest: dict) -> None:
    """Raise IndexCorruptError naming the first file that is missing, extra or changed."""
    recorded: dict = manifest["checksums"]
    try:
        found = checksums(generation)
    except OSError as err:
        raise IndexCorruptError(f"cannot read {generation.name} ({_reason(err)})") from err
    for name in sorted(set(recorded) | set(found)):
        if name not in found:
            raise IndexCorruptError(f"{generation.name}/{name} is missing")
        if recorded.get(name) != found[name]:
            raise IndexCorruptError(f"{generation.name}/{name} does not match its checksum")


def file_sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _reason(err: BaseException) -> str:
    return getattr(err, "strerror", None) or str(err).splitlines()[0]
