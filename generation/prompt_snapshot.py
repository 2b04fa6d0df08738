"""The last prompt kept as its token ids over a runner's live KV cache (CachedLM and LlamaCppLM).

Decoding only appends after the prompt and crops back to it, so the prompt's positions stay cached until
a later prefill or crop replaces them. A runner keeps `tokens` (the ids its cache holds, in order) and
`_snapshot` (the last prompt, or None); the next prefill reuses what both share with its prompt.
"""

from __future__ import annotations

from generation.token_ids import common_prefix_length


class PromptSnapshot:
    tokens: list[int]
    _snapshot: list[int] | None

    @property
    def length(self) -> int:  # the runner's: how many positions its cache holds
        raise NotImplementedError

    def snapshot_prefix(self, token_ids: list[int]) -> int:
        """How many leading tokens of `token_ids` the next prefill would take from the cache."""
        if self._snapshot is None or len(self.tokens) != self.length:  # a cache set from outside: ids unknown
            return 0
        return min(common_prefix_length(self._snapshot, token_ids), common_prefix_length(self.tokens, token_ids))

    @property
    def snapshot_length(self) -> int:
        """How many tokens the snapshot holds (0: none)."""
        return len(self._snapshot) if self._snapshot is not None else 0

    def trim_snapshot(self, length: int) -> None:
        """Keep only the snapshot's first `length` positions (drop a prompt's tail, keep its prefix)."""
        if self._snapshot is not None:
            self._snapshot = self._snapshot[:length]
