"""Retrievers over a HybridIndex: dense, BM25, and their reciprocal-rank fusion.

A template method: the public `retrieve(query, k)` validates and trims, the private
`_retrieve(query, k)` does the work. Results are ScoredChunks, i.e. Chunks that also carry
the fused `score`, each retriever's own score and 1-based rank (`scores`, `ranks`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, fields
from pathlib import Path

from retrieval.chunking import Chunk
from retrieval.embeddings import Embedder
from retrieval.errors import IndexMismatchError
from retrieval.fusion import RRF_K, reciprocal_rank_fusion
from retrieval.index import Hits, HybridIndex
from retrieval.store import default_index_dir, read_manifest, rebuild_hint, require_generation, settings_of

# RRF window: each retriever's top 20 (or top k if larger) is fused. Deeper windows let chunks
# that are mediocre in both lists outrank one retriever's clear first hit (see the issue note).
CANDIDATES = 20


@dataclass(frozen=True)
class ScoredChunk(Chunk):
    score: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)
    ranks: dict[str, int] = field(default_factory=dict)


def scored(chunk: Chunk, score: float, scores: dict[str, float], ranks: dict[str, int]) -> ScoredChunk:
    base = {f.name: getattr(chunk, f.name) for f in fields(Chunk)}
    return ScoredChunk(**base, score=score, scores=scores, ranks=ranks)


class Retriever(ABC):
    name = "retriever"

    def retrieve(self, query: str, k: int = 8) -> list[ScoredChunk]:
        """The k best chunks for query, best first (empty for a blank query)."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        query = query.strip()
        return self._retrieve(query, k)[:k] if query else []

    @abstractmethod
    def _retrieve(self, query: str, k: int) -> list[ScoredChunk]: ...


class SingleRetriever(Retriever):
    """One ranking (dense or BM25) turned into ScoredChunks."""

    def __init__(self, index: HybridIndex) -> None:
        self.index = index

    def _retrieve(self, query: str, k: int) -> list[ScoredChunk]:
        return [
            scored(self.index.chunks[row], score, {self.name: score}, {self.name: rank})
            for rank, (row, score) in enumerate(self.hits(query, k), start=1)
        ]

    @abstractmethod
    def hits(self, query: str, n: int) -> Hits: ...


class DenseRetriever(SingleRetriever):
    name = "dense"

    def __init__(self, index: HybridIndex, embedder: Embedder) -> None:
        super().__init__(index)
        self.embedder = embedder

    def hits(self, query: str, n: int) -> Hits:
        return self.index.dense_search(self.embedder.embed_query(query), n)


class BM25Retriever(SingleRetriever):
    name = "bm25"

    def hits(self, query: str, n: int) -> Hits:
        return self.index.bm25_search(query, n)


class HybridRetriever(Retriever):
    """Dense + BM25, fused with reciprocal rank fusion; `.dense` and `.bm25` are usable alone."""

    name = "hybrid"

    def __init__(self, index: HybridIndex, embedder: Embedder, candidates: int = CANDIDATES, rrf_k: int = RRF_K):
        self.index, self.embedder = index, embedder
        self.dense, self.bm25 = DenseRetriever(index, embedder), BM25Retriever(index)
        self.candidates, self.rrf_k = candidates, rrf_k

    def _retrieve(self, query: str, k: int) -> list[ScoredChunk]:
        n = max(self.candidates, k)
        runs = {r.name: dict(r.hits(query, n)) for r in (self.dense, self.bm25)}
        fused = reciprocal_rank_fusion({name: list(hits) for name, hits in runs.items()}, self.rrf_k)
        return [
            scored(self.index.chunks[row], score, {name: runs[name][row] for name in ranks}, ranks)
            for row, score, ranks in fused[:k]
        ]


def open_index(index_dir: Path | None = None, embedder: Embedder | None = None) -> HybridRetriever:
    """Load the live index generation and its embedding model (the one recorded in the manifest)."""
    index_dir = Path(index_dir) if index_dir is not None else default_index_dir()
    generation = require_generation(index_dir)
    settings = settings_of(read_manifest(generation))
    embedder = embedder or Embedder.load(settings.model)
    if (embedder.model_id, embedder.dim) != (settings.model, settings.dim):
        raise IndexMismatchError(
            f"{index_dir} was built with {settings.model} ({settings.dim} dims) but the query model is "
            f"{embedder.model_id} ({embedder.dim} dims); {rebuild_hint(index_dir)}"
        )
    return HybridRetriever(HybridIndex.load(generation, settings.dim), embedder)
