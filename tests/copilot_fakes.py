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


def script_answer(copilot, monkeypatch, answer: str, finish: str = "eos") -> tuple[list[int], list[bool]]:
    """Make the copilot's engine 'generate' `answer`, one token per event, as if the model wrote it
    and then stopped for `finish` ("eos", or e.g. "repeat" as the repetition guard would).

    Returns the token ids it has handed out so far and a list that gets True once the stream is closed."""
    from generation.drafters.base import Origin
    from generation.engine import Event
    from generation.stats import Stats

    ids = copilot.engine.tokenizer(answer, add_special_tokens=False)["input_ids"]
    generated, closed = [], []

    def generate(prompt_ids, chunks, config, token_filter=None):
        try:
            for i, token in enumerate(ids):
                generated.append(token)
                text = copilot.engine.tokenizer.decode([token])
                last = finish if i == len(ids) - 1 else None
                yield Event(text, [token], [Origin("target")], Stats(new_tokens=i + 1), last)
        finally:
            closed.append(True)

    monkeypatch.setattr(copilot.engine, "generate", generate)
    return generated, closed


def scripted_follow_up(monkeypatch, docs: list[tuple[str, str]], first: tuple[str, str], then: tuple[str, str]):
    """A question and its follow-up, (question, scripted answer) each, put to a copilot with the gate off over
    `docs` on the tiny models (the `tiny_engine` fixture); their two Finals."""
    from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, loading

    copilot = Copilot(
        loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(gate="off")), FakeRetriever(docs)
    )
    script_answer(copilot, monkeypatch, first[1])
    earlier = list(copilot.answer(first[0]))[-1]
    script_answer(copilot, monkeypatch, then[1])
    return earlier, list(copilot.answer(then[0], history=[earlier.turn]))[-1]
