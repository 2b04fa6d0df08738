"""A rule on which next tokens an answer may take, applied to every target row alike.

The engine hands each row of a pass to the filter with the answer tokens that row
continues (the emitted ones plus the draft tokens before it). Plain decoding and every
speculative mode thus see the same filtered distributions, so the exactness contract holds
for the filtered model: greedy output is token for token plain decoding's, and sampling
keeps plain sampling's distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from generation import arrays
from generation.arrays import Logits


class TokenFilter(Protocol):
    def restrict(self, answer_ids: Sequence[int], logits: Logits, greedy: bool) -> Logits:
        """The row of next-token `logits` after `answer_ids`, with the tokens the rule forbids at -inf.

        It must depend on nothing but its arguments (and state fixed before decoding starts).
        Under greedy it may mask only what it needs to make the argmax an allowed token.
        """
        ...


def filter_rows(
    token_filter: TokenFilter, answer_ids: Sequence[int], draft: Sequence[int], logits: Logits, greedy: bool
) -> Logits:
    """Filter each row of a pass over [last token, *draft]: row i continues answer_ids + draft[:i]."""
    rows = [token_filter.restrict([*answer_ids, *draft[:i]], logits[i], greedy) for i in range(logits.shape[0])]
    return arrays.stack(rows)
