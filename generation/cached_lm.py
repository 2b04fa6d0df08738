"""A causal LM plus its KV cache, with a few verbs: prefill, extend, crop, reset.

Rollback after a rejected draft is just cropping the cache back to a length, so the
engine never recomputes the prompt. `prefill` keeps the last prompt as a snapshot and
reuses its longest common prefix with the next prompt, so a repeated question (or a
benchmark running several methods on one prompt) pays prefill once.

The snapshot is the prompt's token ids, not a copy of its keys and values: decoding only
appends after the prompt and crops back to it, so the prompt's positions stay in the cache
until a later prefill or crop replaces them, and `tokens` says which ids the cache holds.
A copy cost the default target 57 KB per position twice over (taken after each prefill,
and again when a prefill reused it): 96 MB each for a 1,700-token prompt, at the peak of
`specrag ask`'s memory. LlamaCppLM keeps its snapshot the same way (prompt_snapshot.py).
Works for any transformers causal LM whose cache is a `DynamicCache`; full-attention layers
append in place (`generation/kv_cache.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

from generation.invariant_attention import MAX_ROWS
from generation.kv_cache import cache_bytes, cache_from_bytes, copyable, growing_cache
from generation.lean_decode import lean_forward, supports
from generation.prompt_snapshot import PromptSnapshot

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class CachedLM(PromptSnapshot):
    def __init__(self, model: PreTrainedModel, keep_snapshot: bool = True) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.cache = growing_cache(model.config)
        self.keep_snapshot = keep_snapshot
        self.tokens: list[int] = []  # the ids whose keys and values the cache holds, in order
        self._snapshot: list[int] | None = None  # the last prompt; its positions stay cached until cropped
        self.reused = 0  # how many tokens the last prefill took from the snapshot
        self.lean = supports(model)  # decoding passes skip transformers' per-call overhead, same logits

    def scratch(self) -> CachedLM:
        """Another cache on the same model, for measurements that must leave this one's alone."""
        return CachedLM(self.model, keep_snapshot=False)

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

    def state_key(self) -> list[str]:
        """What saved keys and values must have been computed with to be loaded here (prefix_store.py): the
        setup (model, size, device, dtype, threads), the weights' files, the attention, torch's release, the
        CPU (its kernels) and how a prefill multiplies (quantized.py's wide matmul)."""
        from core.hardware import cpu_name
        from generation import quantized

        config = self.model.config
        plan = f"{quantized.WIDE_DTYPE}|{quantized.WIDE_ROWS_INT4}|{quantized.WIDE_ROWS}"
        return [
            *self.setup(),
            *weight_files(config),
            str(getattr(config, "_commit_hash", "") or ""),
            str(config._attn_implementation),
            torch.__version__,
            cpu_name(),
            plan,
        ]

    @property
    def state_copyable(self) -> bool:
        """Can this cache be copied out (every layer appends in place; not a sliding window, say)?"""
        return copyable(self.cache)

    def state_bytes(self) -> memoryview:
        """The keys and values of every cached position, as one buffer (kv_cache.cache_bytes)."""
        return cache_bytes(self.cache)

    def load_state(self, token_ids: list[int], payload: memoryview) -> bool:
        """Replace the cache by one `state_bytes` gave for `token_ids`; False (and an empty cache) if `payload`
        is not that. The values are copied: `payload` may be released afterwards."""
        self.reset()
        cache = cache_from_bytes(self.model.config, len(token_ids), self.model.dtype, payload, self.device)
        if cache is None:
            return False
        self.cache, self.tokens, self.reused = cache, list(token_ids), len(token_ids)  # loaded: nothing computed
        if self.keep_snapshot:
            self._snapshot = list(token_ids)
        return True

    @property
    def length(self) -> int:
        """Number of token positions held in the cache."""
        return self.cache.get_seq_length()

    @torch.inference_mode()
    def extend(self, token_ids: list[int], last_only: bool = False) -> torch.Tensor:
        """Feed tokens after the cached ones; return logits [n, V] (or [1, V] if last_only)."""
        ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)
        if self.lean and len(token_ids) <= MAX_ROWS:  # a decoding or verification pass (lean_decode.py)
            logits = lean_forward(self.model, ids, self.cache, last_only)
        else:
            out = self.model(input_ids=ids, cache=self.cache, use_cache=True, logits_to_keep=1 if last_only else 0)
            self.cache, logits = out.cache, out.logits
        self.tokens.extend(token_ids)
        return logits[0]

    def prefill(self, token_ids: list[int]) -> torch.Tensor | None:
        """Reset to exactly `token_ids`, keeping the cached common prefix with the last prompt.

        Returns the logits after the last token, or None when the whole prompt was cached
        (callers that need those logits feed the last token themselves).
        """
        reused = self.snapshot_prefix(token_ids)
        if reused:
            self.crop(reused)
        else:
            self.reset()
        self.reused = reused
        logits = self.extend(token_ids[reused:], last_only=True) if reused < len(token_ids) else None
        if self.keep_snapshot:
            self._snapshot = list(token_ids)
        return logits

    def crop(self, length: int) -> None:
        """Keep the first `length` cached positions."""
        excess = self.length - length
        if excess < 0:
            raise ValueError(f"cannot crop a cache of {self.length} positions to {length}")
        if excess:
            self.cache.crop(-excess)
        del self.tokens[length:]

    def reset(self) -> None:
        self.cache = growing_cache(self.model.config)
        self.tokens = []


def weight_files(config: object) -> list[str]:
    """Name, size and modification time of each weights file in the model's folder (none for a hub id)."""
    folder = Path(str(getattr(config, "_name_or_path", "") or ""))
    if not folder.is_dir():
        return []
    files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf"))
    return [f"{p.name}|{p.stat().st_size}|{p.stat().st_mtime_ns}" for p in files]
