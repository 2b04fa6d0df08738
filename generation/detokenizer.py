"""Incremental detokenization that never splits a multi-byte character.

Byte-level BPE tokens can end in the middle of a UTF-8 character; decoding them alone
gives U+FFFD. We decode a short window of recent tokens and only release text once it
no longer ends in a replacement character (the approach of TGI and vLLM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, skip_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = []
        self.prefix_offset = 0  # start of the decode window
        self.read_offset = 0  # tokens before this have been released as text

    def push(self, token_ids: list[int]) -> str:
        """Add tokens; return the newly completed text (possibly empty)."""
        self.ids.extend(token_ids)
        prefix_text = self._decode(self.ids[self.prefix_offset : self.read_offset])
        new_text = self._decode(self.ids[self.prefix_offset :])
        if len(new_text) <= len(prefix_text) or new_text.endswith(REPLACEMENT):
            return ""
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return new_text[len(prefix_text) :]

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character at the very end)."""
        prefix_text = self._decode(self.ids[self.prefix_offset : self.read_offset])
        new_text = self._decode(self.ids[self.prefix_offset :])
        self.prefix_offset = self.read_offset = len(self.ids)
        return new_text[len(prefix_text) :]

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)
