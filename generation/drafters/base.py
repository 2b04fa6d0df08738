"""The drafter protocol: `propose(context_ids, k) -> Draft` and `observe(num_accepted)`.

A draft is a list of tokens, a proposal distribution per token (None = point mass, as
for an n-gram copy) and the origin of each token. An empty draft is a plain decoding
step, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from generation.arrays import Logits


@dataclass(frozen=True)
class Origin:
    """Where an emitted token came from."""

    kind: str  # "target" | "model" | "chunk" | "context"
    chunk: int | None = None  # index of the retrieved chunk, for kind == "chunk"
    offset: int | None = None  # token offset inside that chunk (or the context)

    @property
    def label(self) -> str:
        if self.kind == "chunk":
            return f"chunk:{self.chunk}"
        return self.kind

    @property
    def drafter(self) -> str:
        """Which drafter family proposed it: "ngram", "model" or "target"."""
        return "ngram" if self.kind in ("chunk", "context") else self.kind


TARGET = Origin("target")
MODEL = Origin("model")


@dataclass
class Draft:
    tokens: list[int] = field(default_factory=list)
    probs: list[Logits | None] = field(default_factory=list)  # q per token; None = point mass
    origins: list[Origin] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    def truncate(self, k: int) -> Draft:
        return Draft(self.tokens[:k], self.probs[:k], self.origins[:k])


class Drafter(Protocol):
    name: str

    def prefill(self, context_ids: list[int]) -> None:
        """Optional warm start on the prompt (build indexes, fill a KV cache)."""

    def propose(self, context_ids: list[int], k: int) -> Draft:
        """Up to k tokens that may follow `context_ids`."""

    def observe(self, num_accepted: int) -> None:
        """How many tokens of the last draft the target accepted."""
