"""The relevance gate: before generating, decide whether the passages can answer the question.

Signal: the best dense cosine similarity between the question and a retrieved passage
(all-MiniLM-L6-v2 vectors are normalised, so it is comparable across questions and
corpora, unlike the rank-based fused score). Below the threshold the copilot, in the
default `refuse` mode, says the sources do not cover the question and lists the nearest
ones instead of letting the model answer from general knowledge; `warn` answers with a
warning; `off` never gates. Passages without a similarity (--context-file, Spec-Bench)
are never gated; retrieved ones are, whoever retrieved them (the eval retrieves itself).

A threshold holds only for the embedding model it was calibrated with: THRESHOLDS maps
model ids to thresholds, and an index built with another model is not gated (the
reading says `calibrated: false`). The thresholds were calibrated on a development split
of our own questions (`python -m app.copilot.gate_calibration`; figures in README.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.copilot.events import Passage
from app.copilot.source_paths import short_paths

GATE_MODES = ("off", "warn", "refuse")
THRESHOLDS = {"sentence-transformers/all-MiniLM-L6-v2": 0.49}  # dev split of corpora/slurm questions: see README


@dataclass(frozen=True)
class Relevance:
    similarity: float | None  # best dense cosine among the passages; None when none has one
    threshold: float | None  # None: no threshold for this embedding model, so no judgement

    @property
    def covered(self) -> bool:
        if self.threshold is None:
            return True
        return self.similarity is not None and self.similarity >= self.threshold

    def to_dict(self) -> dict:
        return {
            "similarity": self.similarity,
            "threshold": self.threshold,
            "calibrated": self.threshold is not None,
            "covered": self.covered,
        }


def best_similarity(passages: Sequence[Passage]) -> float | None:
    """The gate's signal: the best dense cosine among the passages (None when none has one)."""
    return max((p.similarity for p in passages if p.similarity is not None), default=None)


def assess(passages: Sequence[Passage], embedding_model: str | None) -> Relevance:
    return Relevance(best_similarity(passages), THRESHOLDS.get(embedding_model or ""))


def _match(reading: dict) -> str:
    return (
        f"the closest source matches the question at {reading['similarity']:.2f}, "
        f"below the relevance gate's {reading['threshold']:.2f}"
    )


def why_refused(reading: dict | None) -> str:
    """The stats line of a gated answer: the best source's similarity against the threshold (Relevance.to_dict)."""
    if not reading or reading.get("similarity") is None or reading.get("threshold") is None:
        return "not answered: the relevance gate found no source close enough"
    return f"not answered: {_match(reading)}"


def weak_match_warning(reading: dict | None, gated: bool = False) -> str:
    """What `--gate warn` shows with an answer the gate would have refused ("" when it would not have)."""
    if gated or not reading or reading.get("covered", True) or reading.get("similarity") is None:
        return ""
    return f"the sources may not cover this question ({_match(reading)}): check the answer against them"


REFUSAL = "The sources do not cover this question, so I will not guess an answer."


def refusal_text(passages: Sequence[Passage]) -> str:
    """What the copilot says instead of answering: plain, with the nearest sources to look at."""
    lines = [REFUSAL]
    if passages:
        nearest = passages[:3]
        lines.append("The nearest sources I found are:")
        lines += [
            f"- [{p.number}] {p.title or p.source}{f' › {p.heading}' if p.heading else ''} ({path})"
            for p, path in zip(nearest, short_paths([p.source for p in nearest]), strict=True)
        ]
    return "\n".join(lines)
