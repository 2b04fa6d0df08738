"""A causal LM plus its KV cache, with three verbs: extend, crop, reset.

Rollback after a rejected draft is just cropping the cache back to a length, so the
engine never recomputes the prompt. Works for any transformers causal LM whose cache is
a `DynamicCache` (full attention layers).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedModel


class CachedLM:
    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.cache = DynamicCache(config=model.config)

    @property
    def length(self) -> int:
        """Number of token positions held in the cache."""
        return self.cache.get_seq_length()

    @torch.inference_mode()
    def extend(self, token_ids: list[int], last_only: bool = False) -> torch.Tensor:
        """Feed tokens after the cached ones; return logits [n, V] (or [1, V] if last_only)."""
        ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)
        out = self.model(
            input_ids=ids,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1 if last_only else 0,
        )
        self.cache = out.past_key_values
        return out.logits[0]

    def crop(self, length: int) -> None:
        """Keep the first `length` cached positions."""
        excess = self.length - length
        if excess < 0:
            raise ValueError(f"cannot crop a cache of {self.length} positions to {length}")
        if excess:
            self.cache.crop(-excess)

    def reset(self) -> None:
        self.cache = DynamicCache(config=self.model.config)
