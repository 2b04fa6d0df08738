"""Stop a degenerate answer: the same run of tokens coming round again and again.

Under greedy decoding a small model sometimes falls into a loop (the same sentence, or
"[8] Use X ... [9] Use X ..." with only the numbers changing) and spends the rest of its
token budget on it. The guard counts every run of `span` consecutive answer tokens and
reports a loop when one run has been seen `limit` times. It sees only the emitted token
ids, one at a time, so plain and speculative decoding stop at the same token: the output
stays exactly plain decoding's, only shorter.

Tokens of one class count as the same token. The engine puts every numeral token in one
class, so a counting loop is caught too: `--gpu-freq=1000MHz --gpu-freq=2000MHz ...` never
repeats a run of 16 token ids (each window holds a new number), but its runs of token
classes come round every option.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

NUMERAL = -1  # the class of every numeral token
_DIGITS = re.compile(r"[0-9]+")
_WORD_START = "Ġ▁ "  # how byte-level BPE and SentencePiece vocabularies mark a leading space


def numeral_classes(tokenizer: PreTrainedTokenizerBase, chunk: int = 8192) -> dict[int, int]:
    """{token id: NUMERAL} for every vocabulary token that is digits only (with or without a leading space).

    Read `chunk` ids at a time: the whole vocabulary as one dict (`get_vocab`, 151k strings for Qwen)
    raised the peak RSS of `specrag ask` by 28 MB, as it is built when the first answer starts."""
    classes: dict[int, int] = {}
    size = len(tokenizer)
    for start in range(0, size, chunk):
        ids = list(range(start, min(start + chunk, size)))
        for i, token in zip(ids, tokenizer.convert_ids_to_tokens(ids), strict=True):
            if token and _DIGITS.fullmatch(token.lstrip(_WORD_START)):
                classes[i] = NUMERAL
    return classes


class RepetitionGuard:
    def __init__(self, span: int = 0, limit: int = 3, classes: Mapping[int, int] | None = None) -> None:
        """`span` < 1 switches the guard off; `classes` maps token ids that count as one (to a negative id)."""
        self.span, self.limit, self.classes = span, limit, classes or {}
        self.window: deque[int] = deque(maxlen=max(span, 1))
        self.seen: Counter[tuple[int, ...]] = Counter()

    def push(self, token: int) -> bool:
        """Add one emitted token; True when the run it ends has now been seen `limit` times."""
        if self.span < 1:
            return False
        self.window.append(self.classes.get(token, token))
        if len(self.window) < self.span:
            return False
        run = tuple(self.window)
        self.seen[run] += 1
        return self.seen[run] >= self.limit
