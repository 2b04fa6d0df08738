"""A causal LM plus its KV cache, with a few verbs: prefill, extend, crop, reset.

Rollback after a rejected draft is just cropping the cache back to a length, so the
engine never recomputes the prompt. `prefill` keeps a snapshot of the last prompt's
cache and reuses its longest common prefix with the next prompt, so a repeated
question (or a benchmark running several methods on one prompt) pays prefill once.
Works for any transformers causal LM whose cache is a `DynamicCache`; full-attention layers
append in place (`generation/kv_cache.py`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch
from transformers import DynamicCache

from generation.invariant_attention import MAX_ROWS
from generation.kv_cache import growing_cache
from generation.token_ids import common_prefix_length

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class CachedLM:
    def __init__(self, model: PreTrainedModel, keep_snapshot: bool = True) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.cache = growing_cache(model.config)
        self.keep_snapshot = keep_snapshot
        self._snapshot: tuple[list[int], DynamicCache] | None = None
        self.reused = 0  # how many tokens the last prefill took from the snapshot

    @property
    def vocab_size(self) -> int:
        """How many tokens the model scores (its logits' width)."""
        return self.model.get_output_embeddings().out_features

    @property
    def max_pass_rows(self) -> int:
        """The widest pass whose rows are computed as a one-token pass would (row-wise attention)."""
        return MAX_ROWS

    def setup(self) -> list[str]:
        """What a pass's cost depends on besides the kernels: model, size, device, dtype, threads."""
        model = self.model
        name = getattr(model.config, "_name_or_path", "") or type(model).__name__
        params = sum(p.numel() for p in model.parameters())
        dtype = next(model.parameters()).dtype
        return [name, str(params), str(self.device), str(dtype), str(torch.get_num_threads())]

    @property
    def length(self) -> int:
        """Number of token positions held in the cache."""
        return self.cache.get_seq_length()

    @torch.inference_mode()
    def extend(self, token_ids: list[int], last_only: bool = False) -> torch.Tensor:
        """Feed tokens after the cached ones; return logits [n, V] (or [1, V] if last_only)."""
        ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)
        out = self.model(input_ids=ids, cache=self.cache, use_cache=True, logits_to_keep=1 if last_only else 0)
        self.cache = out.cache
        return out.logits[0]

    def prefill(self, token_ids: list[int]) -> torch.Tensor | None:
        """Reset to exactly `token_ids`, reusing the snapshot's common prefix.

        Returns the logits after the last token, or None when the whole prompt came from
        the snapshot (callers that need those logits feed the last token themselves).
        """
        reused = 0
        if self._snapshot is not None:
            tokens, cache = self._snapshot
            reused = common_prefix_length(tokens, token_ids)
            if reused:
                self.cache = copy.deepcopy(cache)
                self.crop(reused)
        if not reused:
            self.reset()
        self.reused = reused
        logits = self.extend(token_ids[reused:], last_only=True) if reused < len(token_ids) else None
        if self.keep_snapshot:
            self._snapshot = (list(token_ids), copy.deepcopy(self.cache))
        return logits

    def snapshot_prefix(self, token_ids: list[int]) -> int:
        """How many leading tokens of `token_ids` the next prefill would take from the snapshot."""
        return common_prefix_length(self._snapshot[0], token_ids) if self._snapshot is not None else 0

    @property
    def snapshot_length(self) -> int:
        """How many tokens the snapshot holds (0: none)."""
        return len(self._snapshot[0]) if self._snapshot is not None else 0

    def trim_snapshot(self, length: int) -> None:
        """Keep only the snapshot's first `length` positions (drop a prompt's tail, keep its prefix)."""
        if self._snapshot is not None:
            tokens, cache = self._snapshot
            if len(tokens) > length:
                cache.crop(length - len(tokens))
            self._snapshot = (tokens[:length], cache)

    def crop(self, length: int) -> None:
        """Keep the first `length` cached positions."""
        excess = self.length - length
        if excess < 0:
            raise ValueError(f"cannot crop a cache of {self.length} positions to {length}")
        if excess:
            self.cache.crop(-excess)

    def reset(self) -> None:
        self.cache = growing_cache(self.model.config)
