"""Helpers on sequences of token ids, shared by every runner (no torch: llamacpp_lm.py uses them)."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
