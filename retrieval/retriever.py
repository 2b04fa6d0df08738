"""Retrievers over a HybridIndex: dense, BM25, and their reciprocal-rank fusion.

A template method: the public `retrieve(query, k)` validates and trims, the private
`_retrieve(query, k)` does the work. Results are ScoredChunks, i.e. Chunks that also carry
the fused `score`, each retriever's own score and 1-based rank (`scores`, `ranks`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from retrieval import cut_code, near_duplicates, neighbours, query_embedder
from retrieval.chunking import Chunk
from retrieval.cross_references import only_references
from retrieval.embeddings import DEFAULT_MODEL_NAME, resolve_model
from retrieval.errors import IndexCorruptError, IndexMismatchError, InvalidArgumentError, RetrievalError
from retrieval.fusion import RRF_K, reciprocal_rank_fusion
from retrieval.index import Hits, HybridIndex
from retrieval.manifest import IndexSettings, load_manifest, roots_of, settings_of
from retrieval.named_terms import NamedTerms, from_entry
from retrieval.query_embedder import QueryModel
from retrieval.store import check_generation, default_index_dir, pin_live, rebuild_hint, sweep

# RRF window: each retriever's top 20 (or top k if larger) is fused. Deeper windows let chunks
# that are mediocre in both lists outrank one retriever's clear first hit (see the issue note).
CANDIDATES = 20
# Weighted RRF: the dense ranking counts twice as much as BM25's. On the Slurm questions' development
# split (README, "Retrieval variants") this raised hit@5 from 0.921 to 0.947 and MRR from 0.749 to
# 0.752 (held-out: hit@5 1.000 both, MRR 0.912 -> 0.941); alone, dense beats BM25 by far (0.93 vs 0.78).
FUSION_WEIGHTS = {"dense": 2.0, "bm25": 1.0}
# Neighbours of one section among the fused top JOIN_WINDOW join into one passage (neighbours.py): the
# prompt's 6 passages by default. Wider windows (10, 20) grew the passages by 14% and 34% against 7% and
# found no gold page more (README, "Retrieval variants", session 38).
JOIN_WINDOW = 6


Fused = tuple[int, float, dict[str, int]]  # an index row, its fused score and its rank in each retriever


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
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgumentError(f"k must be a whole number of at least 1, got {k!r}")
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

    def __init__(self, index: HybridIndex, embedder: QueryModel) -> None:
        super().__init__(index)
        self.embedder = embedder

    def hits(self, query: str, n: int) -> Hits:
        return self.index.dense_search(self.embedder.embed_query(query), n)


class BM25Retriever(SingleRetriever):
    name = "bm25"

    def hits(self, query: str, n: int) -> Hits:
        return self.index.bm25_search(query, n)


class HybridRetriever(Retriever):
    """Dense + BM25, fused with reciprocal rank fusion, a near-copy of a better-ranked chunk left out
    (near_duplicates.py; `collapse_copies=False` keeps it), neighbours of one section joined into one
    passage (neighbours.py; `join_neighbours=False` keeps them apart), a passage cut inside a command or
    code block completed (cut_code.py; `complete_code=False` leaves it cut), a chunk of nothing but man page
    references passed over (cross_references.py; `skip_references=False` keeps it) and the entry of an option
    or setting the query writes out put first (named_terms.py; `named_terms=False` leaves the order);
    `.dense` and `.bm25` are usable alone."""

    name = "hybrid"

    def __init__(
        self,
        index: HybridIndex,
        embedder: QueryModel,
        candidates: int = CANDIDATES,
        rrf_k: int = RRF_K,
        weights: dict[str, float] | None = None,
        collapse_copies: bool = True,
        join_neighbours: bool = True,
        join_window: int = JOIN_WINDOW,
        complete_code: bool = True,
        skip_references: bool = True,
        named_terms: bool = True,
    ):
        self.index, self.embedder = index, embedder
        self.collapse_copies, self.join_neighbours, self.join_window = collapse_copies, join_neighbours, join_window
        self.complete_code, self._sections = complete_code, cut_code.Sections(index.chunks)
        self.dense, self.bm25 = DenseRetriever(index, embedder), BM25Retriever(index)
        self.candidates, self.rrf_k = candidates, rrf_k
        self.weights = FUSION_WEIGHTS if weights is None else weights
        chunks = index.chunks if skip_references else []
        self._references = {row for row, chunk in enumerate(chunks) if only_references(chunk.text)}
        self._terms = NamedTerms(index.chunks if named_terms else [])

    def _retrieve(self, query: str, k: int) -> list[ScoredChunk]:
        n = max(self.candidates, k)
        runs = {r.name: dict(r.hits(query, n)) for r in (self.dense, self.bm25)}
        fused = reciprocal_rank_fusion({name: list(hits) for name, hits in runs.items()}, self.rrf_k, self.weights)
        fused, pinned = self._named_terms_first(
            query, [hit for hit in fused if hit[0] not in self._references], k, runs
        )
        chunks = self.index.chunks
        # neighbours of one section among the first `window` chunks become one passage (neighbours.py)
        window = self.join_window if self.join_neighbours else 0
        limit = k + window
        while True:
            candidates = fused
            if self.collapse_copies:  # a copy of a better-ranked chunk's text gives its place to the next chunk
                candidates = near_duplicates.distinct(fused, lambda hit: chunks[hit[0]].text, limit)
            groups = neighbours.join_neighbours(candidates, lambda hit: chunks[hit[0]], window)
            if not self.complete_code:
                return self._from_entries([scored_group(span, members, runs) for members, span in groups[:k]], pinned)
            passages = self._completed(groups, runs, k)
            if len(passages) == k or not self.collapse_copies or len(candidates) < limit:
                return self._from_entries(passages, pinned)  # k passages, or every candidate used
            limit += 2 * cut_code.MAX_EXTRA  # passages took in later candidates: look further down

    def _named_terms_first(
        self, query: str, fused: list[Fused], k: int, runs: dict[str, dict[int, float]]
    ) -> tuple[list[Fused], dict[str, str]]:
        """`fused` with the chunks defining the options and settings the query writes out first, where
        its first k hold none (named_terms.py); and those chunks' ids, each with the name it defines.
        A chunk ranked below the candidates gets its scores and ranks from the whole index's rankings
        (added to `runs`), so it shows what the retrievers made of it, not a blank."""
        order = {row: rank for rank, (row, _, _) in enumerate(fused)}
        pinned = self._terms.pinned(query, order, {row for row, _, _ in fused[:k]})
        if not pinned:
            return fused, {}
        by_row = {hit[0]: hit for hit in fused}
        if any(row not in by_row for row in pinned):
            whole = {r.name: r.hits(query, len(self.index.chunks)) for r in (self.dense, self.bm25)}
            for name, hits in whole.items():
                runs[name].update(hits)
            rankings = {name: [row for row, _ in hits] for name, hits in whole.items()}
            fused_whole = reciprocal_rank_fusion(rankings, self.rrf_k, self.weights)
            by_row |= {hit[0]: hit for hit in fused_whole if hit[0] in pinned and hit[0] not in by_row}
        first = [by_row.get(row, (row, 0.0, {})) for row in pinned]
        names = {self.index.chunks[row].chunk_id: name for row, name in pinned.items()}
        return first + [hit for hit in fused if hit[0] not in pinned], names

    @staticmethod
    def _from_entries(passages: list[ScoredChunk], pinned: dict[str, str]) -> list[ScoredChunk]:
        """Each passage put first for a name it defines, from that name's entry on (named_terms.from_entry)."""
        if not pinned:
            return passages
        trimmed = []
        for passage in passages:
            first = passage.chunk_id.split(neighbours.JOIN)[0]  # a joined passage starts with its first chunk
            trimmed.append(from_entry(passage, pinned[first]) if first in pinned else passage)
        return trimmed

    def _completed(
        self, groups: list[tuple[list[Fused], Chunk]], runs: dict[str, dict[int, float]], k: int
    ) -> list[ScoredChunk]:
        """The first k passages, each cut command or code block completed (cut_code.py); a passage whose
        chunks an earlier one took in is left out."""
        passages: list[ScoredChunk] = []
        held: set[str] = set()
        for members, span in groups:
            if len(passages) == k:
                break
            span = cut_code.completed(span, self._sections)
            ids = neighbours.member_ids(span.chunk_id)
            if ids <= held:
                continue
            held |= ids
            passages.append(scored_group(span, members, runs))
        return passages


def scored_group(span: Chunk, members: list[Fused], runs: dict[str, dict[int, float]]) -> ScoredChunk:
    """A joined passage scores as its best member, with each retriever's best score and rank among its
    members: the relevance gate reads the dense similarity, and a joined passage is as close as its
    closest chunk."""
    scores: dict[str, float] = {}
    ranks: dict[str, int] = {}
    for row, _, member_ranks in members:
        for name, rank in member_ranks.items():
            scores[name] = max(scores.get(name, float("-inf")), runs[name][row])
            ranks[name] = min(ranks.get(name, rank), rank)
    return scored(span, members[0][1], scores, ranks)


@dataclass(frozen=True)
class Snapshot:
    """One generation loaded into memory: it no longer needs its files once built."""

    generation: str
    settings: IndexSettings
    retriever: HybridRetriever


EmbedderFor = Callable[[IndexSettings], QueryModel]


def load_snapshot(index_dir: Path, embedder_for: EmbedderFor) -> Snapshot:
    """Pin the live generation, verify it, load its rows and the embedder, then unpin (and sweep
    generations that only this reader was still holding)."""
    try:
        with pin_live(index_dir) as lease:
            generation = lease.generation
            try:
                manifest = check_generation(generation)
            except (IndexCorruptError, IndexMismatchError) as err:
                raise _with_hint(err, index_dir, generation) from err
            settings = settings_of(manifest)
            embedder = embedder_for(settings)
            if (embedder.model_id, embedder.dim) != (settings.model, settings.dim):
                raise IndexMismatchError(
                    f"{index_dir} was built with {settings.model} ({settings.dim} dims) but the query model is "
                    f"{embedder.model_id} ({embedder.dim} dims); {rebuild_hint(index_dir)}"
                )
            try:
                index = HybridIndex.load(generation, settings.dim)
                if len(index) != manifest["chunks"]:
                    raise IndexCorruptError(
                        f"{generation.name} holds {len(index)} chunks, its manifest says {manifest['chunks']}"
                    )
            except IndexCorruptError as err:
                raise _with_hint(err, index_dir, generation) from err
    finally:
        sweep(index_dir)
    return Snapshot(generation.name, settings, HybridRetriever(index, embedder))


def _with_hint(err: RetrievalError, index_dir: Path, generation: Path) -> RetrievalError:
    try:
        roots = roots_of(load_manifest(generation))
    except IndexCorruptError:
        roots = []
    damaged = "the index is damaged: " if isinstance(err, IndexCorruptError) else ""
    return type(err)(f"{damaged}{err}; {rebuild_hint(index_dir, roots)}")


def trusted_embedder(index_dir: Path, model: str | Path | None = None) -> EmbedderFor:
    """Load the index's model only if it is the packaged default or the one the caller named:
    a model path in a manifest is data from disk, and loading a model can run its code."""

    def load(settings: IndexSettings) -> QueryModel:
        named = resolve_model(model)[0] if model is not None else None
        if settings.model == DEFAULT_MODEL_NAME and named in (None, DEFAULT_MODEL_NAME):
            return query_embedder.load_query_embedder()
        if named == settings.model:
            return query_embedder.load_query_embedder(model)
        raise IndexMismatchError(
            f"{index_dir} was built with the embedding model {settings.model}; pass --model {settings.model} "
            f"if you trust it, or {rebuild_hint(index_dir)}"
        )

    return load


def given_embedder(embedder: QueryModel) -> EmbedderFor:
    return lambda settings: embedder


def open_index(
    index_dir: Path | None = None, embedder: QueryModel | None = None, model: str | Path | None = None
) -> HybridRetriever:
    """A retriever over the live generation as it is now (see retrieval.live for one that follows
    new generations). Its model is `embedder`, else the index's model if trusted (trusted_embedder)."""
    index_dir = Path(index_dir) if index_dir is not None else default_index_dir()
    embedder_for = given_embedder(embedder) if embedder is not None else trusted_embedder(index_dir, model)
    return load_snapshot(index_dir, embedder_for).retriever
