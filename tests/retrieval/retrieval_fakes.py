"""A stand-in embedder for ingest mechanics tests: instant, deterministic, and it records its inputs."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np


class FakeEmbedder:
    """Hashed bag-of-words vectors; same interface as retrieval.embeddings.Embedder."""

    def __init__(self, model_id: str = "fake-model", dim: int = 64) -> None:
        self.model_id, self.dim, self.max_tokens = model_id, dim, 512
        self.embedded: list[str] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            v[zlib.crc32(word.encode()) % self.dim] += 1.0
        return v / max(float(np.linalg.norm(v)), 1e-9)

    def embed_documents(self, texts: list[str], progress: bool = False) -> np.ndarray:
        self.embedded.extend(texts)
        return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.vector(text)[None, :]


def every_model_load_gives(monkeypatch: Any, make: Callable[[], Any]) -> None:
    """Route both model loads, ingest's `Embedder.load` and the query side's `load_query_embedder`
    (what `open_index` and the CLI's search call), to make()."""
    from retrieval import query_embedder
    from retrieval.embeddings import Embedder

    monkeypatch.setattr(Embedder, "load", classmethod(lambda cls, model=None, precision="auto": make()))
    monkeypatch.setattr(query_embedder, "load_query_embedder", lambda model=None, precision="auto": make())


def fake_index(chunks: list[Any]) -> tuple[Any, FakeEmbedder]:
    """A HybridIndex over `chunks`, embedded by a FakeEmbedder (returned with it, for the query side)."""
    from retrieval.index import HybridIndex

    embedder = FakeEmbedder()
    return HybridIndex.build(chunks, embedder.embed_documents([c.text for c in chunks])), embedder
