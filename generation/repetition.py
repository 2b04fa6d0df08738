"""Stop a degenerate answer: the same run of tokens coming round again and again.

Under greedy decoding a small model sometimes falls into a loop (the same sentence, or
"[8] Use X ... [9] Use X ..." with only the numbers changing) and spends the rest of its
token budget on it. The guard counts every run of `span` consecutive answer tokens and
reports a loop when one run has been seen `limit` times. It sees only the emitted token
ids, one at a time, so plain and speculative decoding stop at the same token: the output
stays exactly plain decoding's, only shorter.
"""

from __future__ import annotations

from collections import Counter, deque


class RepetitionGuard:
    def __init__(self, span: int = 0, limit: int = 3) -> None:
        """`span` < 1 switches the guard off."""
        self.span, self.limit = span, limit
        self.window: deque[int] = deque(maxlen=max(span, 1))
        self.seen: Counter[tuple[int, ...]] = Counter()

    def push(self, token: int) -> bool:
        """Add one emitted token; True when the run it ends has now been seen `limit` times."""
        if self.span < 1:
            return False
        self.window.append(token)
        if len(self.window) < self.span:
            return False
        run = tuple(self.window)
        self.seen[run] += 1
        return self.seen[run] >= self.limit
