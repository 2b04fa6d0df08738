"""Logit warping and sampling, shared by the target and every draft distribution.

Convention used across generation/: p is the target distribution, q the draft's.
Both are produced by the same `logits_to_probs`, so speculative sampling compares like
with like. Temperature 0 is an explicit argmax branch returning one-hot rows. Logits are torch
tensors or numpy arrays (llama.cpp), whichever the runner gives (arrays.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from generation import arrays
from generation.arrays import Generator, Logits


@dataclass(frozen=True)
class SamplingParams:
    """How next-token distributions are shaped; temperature 0 means greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 disables it), got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def logits_to_probs(logits: Logits, params: SamplingParams) -> Logits:
    """Warp logits [..., V] into probabilities [..., V] (float32)."""
    logits = arrays.float32(logits)
    if params.greedy:
        return arrays.one_hot_argmax(logits)
    logits = logits / params.temperature
    if params.top_k and params.top_k < logits.shape[-1]:
        logits = arrays.keep_top_k(logits, params.top_k)
    if params.top_p < 1.0:
        logits = arrays.keep_top_p(logits, params.top_p)
    return arrays.softmax(logits)


def sample(probs: Logits, generator: Generator) -> int:
    """Draw one token id from a 1-D distribution."""
    return arrays.sample(probs, generator)
