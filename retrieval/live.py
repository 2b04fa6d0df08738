"""LiveRetriever: the retriever a long-running server keeps (web chat, Slack bot, batch eval).

It serves the generation that was live when it last looked, and looks on every query: one read
of the small CURRENT file. When CURRENT names another generation, that generation is pinned,
verified and loaded (store.pin_live, retriever.load_snapshot) and swapped in, so an ingest shows
up on the next query without a restart. A query never waits for an ingest, and the old
snapshot keeps serving while the new one loads in the querying thread.

If the new generation cannot be opened (damaged, another model), the previous snapshot keeps
serving, the error is logged once and kept in `last_error`, and that CURRENT value is not
retried until it changes.

    from retrieval.live import LiveRetriever
    retriever = LiveRetriever(index_dir)          # raises if there is no usable index yet
    chunks = retriever.retrieve("rotate the munge key", k=8)
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from retrieval.chunking import Chunk
from retrieval.errors import RetrievalError
from retrieval.manifest import IndexSettings
from retrieval.query_embedder import QueryModel
from retrieval.retriever import Retriever, ScoredChunk, Snapshot, load_snapshot, trusted_embedder
from retrieval.store import CURRENT, default_index_dir

log = logging.getLogger(__name__)
MODES = ("hybrid", "dense", "bm25")


class LiveRetriever(Retriever):
    name = "live"

    def __init__(
        self,
        index_dir: Path | None = None,
        embedder: QueryModel | None = None,
        model: str | Path | None = None,
        mode: str = "hybrid",
    ) -> None:
        if mode not in MODES:
            raise RetrievalError(f"unknown retrieval mode {mode!r}; use one of {', '.join(MODES)}")
        self.index_dir = Path(index_dir) if index_dir is not None else default_index_dir()
        self.mode, self.last_error = mode, None
        self._embedder, self._trusted = embedder, trusted_embedder(self.index_dir, model)
        self._lock = threading.Lock()
        self._failed_pointer: str | None = None
        self._snapshot: Snapshot = load_snapshot(self.index_dir, self._embedder_for)

    @property
    def embedder(self) -> QueryModel | None:
        """The embedding model of the generation being served (its id keys the relevance gate)."""
        return self._embedder

    @property
    def generation(self) -> str:
        """The name of the generation being served."""
        return self._snapshot.generation

    @property
    def chunks(self) -> list[Chunk]:
        """The chunks of the generation being served."""
        return self._snapshot.retriever.index.chunks

    def refresh(self) -> bool:
        """Switch to the live generation if CURRENT changed; True when it switched."""
        pointer = self._read_pointer()
        if pointer in (self._snapshot.generation, self._failed_pointer):
            return False
        with self._lock:  # one thread loads; the others keep serving the current snapshot
            if self._read_pointer() == self._snapshot.generation:
                return False
            try:
                self._snapshot = load_snapshot(self.index_dir, self._embedder_for)
            except RetrievalError as err:
                self.last_error, self._failed_pointer = err, pointer
                log.warning("specrag: still serving %s: %s", self._snapshot.generation, err)
                return False
            self._failed_pointer = None
            return True

    def _retrieve(self, query: str, k: int) -> list[ScoredChunk]:
        self.refresh()
        hybrid = self._snapshot.retriever
        return {"hybrid": hybrid, "dense": hybrid.dense, "bm25": hybrid.bm25}[self.mode]._retrieve(query, k)

    def _read_pointer(self) -> str | None:
        try:
            return (self.index_dir / CURRENT).read_text(encoding="utf-8").strip()
        except OSError:
            return None

    def _embedder_for(self, settings: IndexSettings) -> QueryModel:
        """Reuse the loaded model while the index keeps its model; load the new one if trusted."""
        if self._embedder is None or self._embedder.model_id != settings.model:
            self._embedder = self._trusted(settings)
        return self._embedder
