"""N-gram copy drafter: continue the longest suffix of the context found in the sources.

Sources are the retrieved chunks (token ids, in retrieval order) and the live context
itself (prompt + answer so far), since answers quote their sources and repeat themselves.
Each source keeps a table from every n-gram (n = 1..max_ngram) to the positions right
after it, so a lookup is max_ngram dictionary probes. Drafts are point masses.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from generation.drafters.base import Draft, Origin
from generation.token_ids import common_prefix_length


class NgramTable:
    """n-gram -> end positions (index right after the n-gram) in one growing token list."""

    def __init__(self, max_ngram: int, tokens: Sequence[int] = ()) -> None:
        self.max_ngram = max_ngram
        self.tokens: list[int] = []
        self.ends: dict[tuple[int, ...], list[int]] = defaultdict(list)
        self.extend(tokens)

    def extend(self, tokens: Sequence[int]) -> None:
        for token in tokens:
            self.tokens.append(token)
            end = len(self.tokens)
            for n in range(1, min(self.max_ngram, end) + 1):
                self.ends[tuple(self.tokens[end - n : end])].append(end)

    def truncate(self, length: int) -> None:
        """Forget everything after `length` tokens (rare: only if the context shrinks)."""
        if length < len(self.tokens):
            kept = self.tokens[:length]
            self.tokens, self.ends = [], defaultdict(list)
            self.extend(kept)


@dataclass(frozen=True)
class Match:
    source: int  # index into the chunk list, or -1 for the context
    end: int  # position right after the matched n-gram in that source
    length: int  # how many context tokens match (may exceed max_ngram)
    continuation: list[int]

    @property
    def from_chunk(self) -> bool:
        return self.source >= 0


class NgramDrafter:
    name = "ngram"

    def __init__(
        self, chunks: Sequence[Sequence[int]] = (), max_ngram: int = 8, min_ngram: int = 1, max_extend: int = 32
    ) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram, self.min_ngram, self.max_extend = max_ngram, min_ngram, max_extend
        self.chunks = [NgramTable(max_ngram, chunk) for chunk in chunks]
        self.context = NgramTable(max_ngram)

    def prefill(self, context_ids: list[int]) -> None:
        self._sync(context_ids)

    def lookup(self, context_ids: list[int], k: int) -> Match | None:
        """The best match for the context's suffix, with up to k continuation tokens."""
        self._sync(context_ids)
        for n in range(min(self.max_ngram, len(context_ids)), self.min_ngram - 1, -1):
            key = tuple(context_ids[-n:])
            best: tuple | None = None
            for source, table in self._sources():
                for end in table.ends.get(key, ()):
                    if end >= len(table.tokens) or (source < 0 and end >= len(context_ids)):
                        continue  # nothing follows this occurrence
                    length = n + self._extend_back(table.tokens, end - n, context_ids, n)
                    # prefer longer matches, then chunks over the context, then the latest context position
                    rank = (length, source >= 0, -source if source >= 0 else end)
                    if best is None or rank > best[0]:
                        best = (rank, source, end, length)
            if best is not None:
                _, source, end, length = best
                table = self.chunks[source] if source >= 0 else self.context
                return Match(source, end, length, table.tokens[end : end + k])
        return None

    def propose(self, context_ids: list[int], k: int) -> Draft:
        match = self.lookup(context_ids, k) if k > 0 else None
        return Draft() if match is None else draft_from_match(match)

    def observe(self, num_accepted: int) -> None:
        pass

    def _sources(self):
        yield from enumerate(self.chunks)
        yield -1, self.context

    def _sync(self, context_ids: list[int]) -> None:
        known = self.context.tokens
        if len(context_ids) < len(known) or context_ids[: len(known)] != known:
            self.context.truncate(common_prefix_length(known, context_ids))
        self.context.extend(context_ids[len(self.context.tokens) :])

    def _extend_back(self, tokens: list[int], start: int, context_ids: list[int], n: int) -> int:
        """How many more tokens before the n-gram also match (bounded by max_extend)."""
        extra = 0
        while (
            extra < self.max_extend
            and start - extra - 1 >= 0
            and len(context_ids) - n - extra - 1 >= 0
            and tokens[start - extra - 1] == context_ids[len(context_ids) - n - extra - 1]
        ):
            extra += 1
        return extra


def draft_from_match(match: Match) -> Draft:
    kind = "chunk" if match.from_chunk else "context"
    chunk = match.source if match.from_chunk else None
    origins = [Origin(kind, chunk, match.end + i) for i in range(len(match.continuation))]
    return Draft(list(match.continuation), [None] * len(match.continuation), origins)
