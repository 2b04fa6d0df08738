"""A stand-in retriever for pipeline and front-end tests: fixed documents, recorded queries."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Hit:
    """What a retriever hit looks like to the pipeline (retrieval.retriever.ScoredChunk's fields it reads)."""

    text: str
    source: str
    chunk_id: str
    score: float
    title: str = "Runbook"
    heading: str = "Section"
    scores: dict = field(default_factory=dict)


@dataclass
class Embedder:
    model_id: str = "fake-model"  # no gate threshold is calibrated for it, so it never gates


@dataclass
class FakeRetriever:
    """Returns `docs` ((source, text) pairs) in order for any query; dense similarity falls by 0.1 a rank."""

    docs: list[tuple[str, str]]
    similarity: float = 0.9
    title: str = "Runbook"
    heading: str = "Section"
    embedder: Embedder = field(default_factory=Embedder)
    queries: list[str] = field(default_factory=list)

    def retrieve(self, query: str, k: int) -> list[Hit]:
        self.queries.append(query)
        hits = [
            Hit(text, source, f"{source}#{text[:30]}", 1.0 / (i + 1), self.title, self.heading,
                {"dense": self.similarity - i / 10})
            for i, (source, text) in enumerate(self.docs)
        ]  # fmt: skip
        return hits[:k]
