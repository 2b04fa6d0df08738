"""Near-duplicate chunks collapse to their best-ranked copy.

Sibling man pages share whole passages: srun, sbatch and salloc print the same description for
most of their options, so one question often ranks two or three copies of one text in the top 5,
and the pages that answer it fall out of the prompt. A chunk most of whose word 6-grams
(`COVERED` of them) already stand in a better-ranked chunk adds nothing the model has not read.

Measured on the Slurm index (README, "Retrieval", session 35): no question set lost a hit@5 and the
bundled runbooks, which share no text between files, kept every passage.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeVar

SHINGLE = 6  # words per n-gram: long enough that shared boilerplate ("If this option is") is not a copy
COVERED = 0.8  # share of a chunk's n-grams found in one better-ranked chunk that makes it a copy

_WORDS = re.compile(r"\w+")
T = TypeVar("T")


@lru_cache(maxsize=4096)
def shingles(text: str) -> frozenset[tuple[str, ...]]:
    """The text's word n-grams, lower-cased (its whole word list when shorter than one n-gram)."""
    words = _WORDS.findall(text.lower())
    if len(words) < SHINGLE:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1))


def is_copy(text: str, of: str) -> bool:
    """Whether `COVERED` of `text`'s n-grams are in `of` (an empty text is nobody's copy)."""
    mine = shingles(text)
    return bool(mine) and len(mine & shingles(of)) >= COVERED * len(mine)


def distinct(ranked: Iterable[T], text_of: Callable[[T], str], k: int) -> list[T]:
    """The first k items of `ranked` that are no copy of an item kept before them."""
    kept: list[T] = []
    for item in ranked:
        text = text_of(item)
        if not any(is_copy(text, text_of(earlier)) for earlier in kept):
            kept.append(item)
            if len(kept) == k:
                break
    return kept
