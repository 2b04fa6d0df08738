"""Attention whose result for a query row does not depend on the other rows of the pass.

Why: with float32 eager attention, `q @ k^T` for 16 query rows differed from the same rows
computed one at a time by ~2e-5 (the BLAS takes a gemv path for 1 row and a gemm path for
more), and SDPA differed by up to 0.19 in a logit (DESIGN.md). Either way a speculative
verification pass would not reproduce plain decoding bit for bit.

How: for passes of at most `MAX_ROWS` query rows (every decoding and verification pass),
row i is computed exactly as a plain decoding step would compute it: its own keys and
values cropped to the causal length (kv_len - q_len + i + 1), batched over KV heads, so
the kernels see the same shapes and data either way.
Longer passes (prefill) use SDPA, which is fastest; prefill is shared by plain and
speculative decoding alike, so it need not be row invariant. Batch size 1, no padding.

Registered with transformers as "specrag_invariant"; `use_invariant_attention(model)`
switches a model to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers.integrations.sdpa_attention import sdpa_attention_forward

if TYPE_CHECKING:  # modeling_utils and masking_utils (torch._dynamo, sympy) cost ~170 MB and 3 s to import
    from transformers import PreTrainedModel

NAME = "specrag_invariant"
MAX_ROWS = 32  # verification passes are at most max_draft + 1 = 17 rows


def invariant_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    batch, heads, rows, dim = query.shape
    if rows > MAX_ROWS or batch != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    scaling = scaling if scaling is not None else dim**-0.5
    kv_heads, kv_len = key.shape[1], key.shape[2]
    out = torch.empty(rows, heads, dim, dtype=query.dtype)
    for i in range(rows):
        end = kv_len - rows + i + 1
        q = query[0, :, i].reshape(kv_heads, heads // kv_heads, dim)  # the query heads sharing each KV head
        out[i] = _one_row(q, key[0, :, :end], value[0, :, :end], scaling).reshape(heads, dim)
    return out.unsqueeze(0), None


def _one_row(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scaling: float) -> torch.Tensor:
    """Softmax(q k^T * scaling) v for one position: q [kv_heads, groups, dim], k and v [kv_heads, end, dim].

    k and v are views of the cache with its batch stride, which is longer in a verification pass
    than in a plain step; each batch entry is still one gemm of identical shape (checked in tests)."""
    scores = torch.bmm(q, k.transpose(1, 2)) * scaling  # [kv_heads, groups, end]
    probs = torch.softmax(scores.float(), dim=-1).to(v.dtype)
    return torch.bmm(probs, v)


def register_invariant_attention() -> None:
    """Make NAME a transformers attention implementation (idempotent). Called where a torch model is
    built or switched, so a process that runs llama.cpp never imports transformers' modeling_utils."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(NAME, invariant_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_invariant_attention(model: PreTrainedModel) -> PreTrainedModel:
    register_invariant_attention()
    model.config._attn_implementation = NAME
    for module in model.modules():
        if hasattr(module, "config") and hasattr(module.config, "_attn_implementation"):
            module.config._attn_implementation = NAME
    return model
