"""HybridIndex: the chunk rows, their dense vectors in FAISS and a BM25 index over the same rows.

Dense search uses faiss directly: an exact IndexFlatIP over L2-normalised vectors (inner
product = cosine). At the scale of a docs site (thousands of chunks) exact search takes well
under a millisecond, so no training or approximate index is needed. The vectors are stored
as vectors.npy, the one source of truth, which lets incremental ingest reuse the rows of
unchanged files; the flat index is rebuilt from it at load in milliseconds. vector_ids.json
names the chunk of each vector row, and chunks meet their vectors through that id on load,
never by position: a lost line in chunks.jsonl can no longer shift every later vector. LangChain's FAISS
store was not used: its save_local/load_local pickles the docstore and needs
allow_dangerous_deserialization to load.

BM25 is bm25s (stemmed with PyStemmer, English stopwords), saved with its own save() as JSON
and .npy, and loaded with allow_pickle=False. Both retrievers read `Chunk.indexed_text()`,
which prepends the document title and section heading to the chunk text.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import faiss
import numpy as np

from retrieval.chunking import Chunk
from retrieval.errors import IndexCorruptError
from retrieval.stemming import english_stemmer

CHUNKS = "chunks.jsonl"
VECTORS = "vectors.npy"
VECTOR_IDS = "vector_ids.json"
BM25_DIR = "bm25"

Hits = list[tuple[int, float]]  # (row, score), best first


def _bm25s_without_numba() -> ModuleType:
    """bm25s, imported without numba unless something already loaded numba.

    bm25s imports numba whenever it is installed (ranx, which the eval uses, installs it), for its
    `retrieve` backend; specrag only calls `tokenize`, `index` and `get_scores`, which are numpy and
    SciPy either way. numba's import JIT-compiles bm25s's kernels: +57 MB resident and +0.3 s in
    every `ask` and server process (85 against 142 MB after loading the Slurm index's BM25; the
    same scores, get_scores 0.06 ms either way). A `None` entry in sys.modules makes `import numba`
    raise ImportError, bm25s's own signal to go without; the entry is removed right after, so the
    eval's ranx still imports numba."""
    if "bm25s" in sys.modules or "numba" in sys.modules:
        return importlib.import_module("bm25s")
    sys.modules["numba"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module("bm25s")
    finally:
        del sys.modules["numba"]


bm25s = _bm25s_without_numba()


def bm25_tokens(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", stemmer=english_stemmer(), return_ids=False, show_progress=False)


class HybridIndex:
    def __init__(self, chunks: list[Chunk], vectors: np.ndarray, bm25: bm25s.BM25 | None) -> None:
        if len(chunks) != len(vectors):
            raise IndexCorruptError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        self.chunks, self.vectors, self.bm25 = chunks, vectors, bm25
        self.dense = faiss.IndexFlatIP(vectors.shape[1])
        self.dense.add(vectors)

    @classmethod
    def build(cls, chunks: list[Chunk], vectors: np.ndarray) -> HybridIndex:
        bm25 = None
        if chunks:
            bm25 = bm25s.BM25()
            bm25.index(bm25_tokens([c.indexed_text() for c in chunks]), show_progress=False)
        return cls(chunks, vectors, bm25)

    def __len__(self) -> int:
        return len(self.chunks)

    def dense_search(self, query_vector: np.ndarray, n: int) -> Hits:
        if not self.chunks:
            return []
        scores, rows = self.dense.search(query_vector.reshape(1, -1), min(n, len(self.chunks)))
        return [(int(r), float(s)) for r, s in zip(rows[0], scores[0], strict=True) if r >= 0]

    def bm25_search(self, query: str, n: int) -> Hits:
        tokens = bm25_tokens([query])[0]
        if self.bm25 is None or not tokens:
            return []
        scores = self.bm25.get_scores(tokens)
        n = min(n, len(scores))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(r), float(scores[r])) for r in top if scores[r] > 0]

    # --- persistence: JSON lines, .npy and bm25s files, never pickle ---------------------------

    def save(self, directory: Path) -> None:
        with open(directory / CHUNKS, "w", encoding="utf-8") as handle:
            for chunk in self.chunks:
                handle.write(json.dumps(chunk.to_dict(), ensure_ascii=False) + "\n")
        np.save(directory / VECTORS, self.vectors, allow_pickle=False)
        (directory / VECTOR_IDS).write_text(json.dumps([c.chunk_id for c in self.chunks]) + "\n", encoding="utf-8")
        if self.bm25 is not None:
            self.bm25.save(str(directory / BM25_DIR), show_progress=False)

    @classmethod
    def load(cls, directory: Path, dim: int) -> HybridIndex:
        chunks, vectors = load_rows(directory, dim)
        bm25 = None
        if chunks:
            try:
                bm25 = bm25s.BM25.load(str(directory / BM25_DIR), allow_pickle=False, show_progress=False)
            except (OSError, ValueError, KeyError, TypeError, EOFError) as err:
                raise IndexCorruptError(f"{directory.name}/{BM25_DIR} is damaged ({type(err).__name__})") from err
        return cls(chunks, vectors, bm25)


def load_rows(directory: Path, dim: int) -> tuple[list[Chunk], np.ndarray]:
    """Chunks and, row for row, the vector stored under each chunk's id (no search structure)."""
    chunks, ids = _read_chunks(directory), _read_ids(directory)
    vectors = _read_vectors(directory, dim)
    if not len(chunks) == len(ids) == len(vectors):
        raise IndexCorruptError(
            f"{directory.name} holds {len(chunks)} chunks, {len(ids)} ids and {len(vectors)} vectors"
        )
    row_of = {chunk_id: row for row, chunk_id in enumerate(ids)}
    if len(row_of) != len(ids) or len({c.chunk_id for c in chunks}) != len(chunks):
        raise IndexCorruptError(f"{directory.name} repeats a chunk id")
    missing = [c.chunk_id for c in chunks if c.chunk_id not in row_of]
    if missing:
        raise IndexCorruptError(f"{directory.name}: chunk {missing[0]} has no vector")
    order = np.fromiter((row_of[c.chunk_id] for c in chunks), dtype=np.int64, count=len(chunks))
    return chunks, np.ascontiguousarray(vectors[order])


def _read_chunks(directory: Path) -> list[Chunk]:
    try:
        with open(directory / CHUNKS, encoding="utf-8") as handle:
            return [Chunk.from_dict(json.loads(line)) for line in handle]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise IndexCorruptError(f"{directory.name}/{CHUNKS} is damaged ({type(err).__name__})") from err


def _read_ids(directory: Path) -> list[str]:
    try:
        ids = json.loads((directory / VECTOR_IDS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise IndexCorruptError(f"{directory.name}/{VECTOR_IDS} is damaged ({type(err).__name__})") from err
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise IndexCorruptError(f"{directory.name}/{VECTOR_IDS} is not a list of chunk ids")
    return ids


def _read_vectors(directory: Path, dim: int) -> np.ndarray:
    # numpy's own messages for a damaged file mention allow_pickle, which points users at unsafe loading
    try:
        vectors = np.load(directory / VECTORS, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise IndexCorruptError(f"{directory.name}/{VECTORS} is damaged (not a float32 .npy array)") from err
    if not isinstance(vectors, np.ndarray) or vectors.ndim != 2 or vectors.dtype != np.float32:
        raise IndexCorruptError(f"{directory.name}/{VECTORS} is damaged (not a 2-D float32 array)")
    if vectors.shape[1] != dim:
        raise IndexCorruptError(f"{directory.name}/{VECTORS} has {vectors.shape[1]}-dim rows, the manifest says {dim}")
    return vectors
