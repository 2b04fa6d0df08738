"""A decoding pass through a Hugging Face Qwen2/Llama model without the framework's per-call overhead.

Why: on the int4 path a one-token pass of the default target took 106 ms on a 2-core AMX Xeon, of
which the int4 and int8 kernels took 77 ms and attention's matmuls 4 ms (torch profiler, 700 tokens
of context). Most of the rest was Python around them: transformers 5 wraps every decoder layer and
attention call in decorators (keyword deprecation, output capture, gradient checkpointing), builds a
causal mask each pass and goes through `nn.Module.__call__` for each of ~450 submodules. On a small
model (the draft) that overhead weighs more still, and every drafted token pays it.

How: `lean_forward` runs the same modules' `forward` methods in the same order on the same tensors,
and writes out the glue between them (the decoder layer, the attention block, the model loop) with
the very operations Hugging Face's code applies, so the logits are bit-identical to
`model(input_ids=..., cache=...)` (tests compare them with `torch.equal`). It runs only passes the
invariant attention computes row by row (at most `MAX_ROWS` new tokens, which needs no mask) and only
models whose layers it knows (`supports`); anything else, prefill included, takes the model's forward.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from generation.gated_mlp import GATED_MLPS
from generation.invariant_attention import MAX_ROWS, NAME, invariant_attention
from generation.quantized import ACT, MIN_WIDE_ROWS

if TYPE_CHECKING:
    from transformers import PreTrainedModel
    from transformers.cache_utils import Cache

assert MAX_ROWS < MIN_WIDE_ROWS  # a lean pass never takes the quantized layers' prefill product

# Decoder layers whose forward is residual + attention(norm(x)), residual + mlp(norm(x)) with
# attention = o_proj(attend(rope(q_proj(x)), rope(k_proj(x)), v_proj(x))): the glue written out below.
_LAYERS = ("Qwen2DecoderLayer", "LlamaDecoderLayer", "MistralDecoderLayer")
_ROTARY = ("Qwen2RotaryEmbedding", "LlamaRotaryEmbedding", "MistralRotaryEmbedding")


def supports(model: PreTrainedModel) -> bool:
    """Can `lean_forward` stand in for this model's forward on decoding passes?"""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or getattr(model.config, "_attn_implementation", None) != NAME:
        return False
    if type(getattr(inner, "rotary_emb", None)).__name__ not in _ROTARY:
        return False
    if inner.rotary_emb.rope_type != "default" or getattr(model.config, "pretraining_tp", 1) != 1:
        return False
    for layer in layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if type(layer).__name__ not in _LAYERS or attn is None or getattr(attn, "sliding_window", None):
            return False
        if type(mlp).__name__ not in (*GATED_MLPS, "GatedMLP"):
            return False
        if any(hasattr(attn, name) for name in ("q_norm", "k_norm")) or _rope(attn) is None:
            return False
    if len(layers) != model.config.num_hidden_layers:
        return False
    # calling `forward` directly would skip hooks (e.g. accelerate's offloading), so a model with any runs as it is
    return not any(m._forward_hooks or m._forward_pre_hooks or hasattr(m, "_hf_hook") for m in model.modules())


@torch.inference_mode()
def lean_forward(model: PreTrainedModel, input_ids: torch.Tensor, cache: Cache, last_only: bool) -> torch.Tensor:
    """Logits [1, n, V] (or [1, 1, V] with `last_only`) for `input_ids` [1, n] after the cached positions,
    appending their keys and values to `cache`; bit-identical to the model's own forward."""
    inner = model.model
    n = input_ids.shape[1]
    if n > MAX_ROWS:
        raise ValueError(f"lean_forward runs passes of at most {MAX_ROWS} tokens, got {n}")
    hidden = inner.embed_tokens.forward(input_ids)
    position_ids = (torch.arange(n, device=hidden.device) + cache.get_seq_length()).unsqueeze(0)
    rotary = inner.rotary_emb.forward(hidden, position_ids)
    rope = _rope(inner.layers[0].self_attn)
    for layer in inner.layers:
        residual = hidden
        hidden = residual + _attention(layer.self_attn, layer.input_layernorm.forward(hidden), rope, rotary, cache)
        residual = hidden
        hidden = residual + _mlp(layer.mlp, layer.post_attention_layernorm.forward(hidden))
    hidden = inner.norm.forward(hidden)
    if last_only:
        hidden = hidden[:, -1:, :]
    return model.lm_head.forward(hidden)


def _attention(
    attn: torch.nn.Module, hidden: torch.Tensor, rope: Callable, rotary: tuple[torch.Tensor, torch.Tensor], cache: Cache
) -> torch.Tensor:
    hidden_shape = (*hidden.shape[:-1], -1, attn.head_dim)
    query, key, value = (
        p.view(hidden_shape).transpose(1, 2) for p in _products((attn.q_proj, attn.k_proj, attn.v_proj), hidden)
    )
    query, key = rope(query, key, *rotary)
    key, value = cache.update(key, value, attn.layer_idx)
    out, _ = invariant_attention(attn, query, key, value, None, scaling=attn.scaling)
    return attn.o_proj.forward(out.reshape(*hidden.shape[:-1], -1).contiguous())


def _mlp(mlp: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """down(act(gate(x)) * up(x)), the forward of every MLP `supports` admits on a decoding pass."""
    gate, up = _products((mlp.gate_proj, mlp.up_proj), hidden)
    return _products((mlp.down_proj,), mlp.act_fn(gate) * up)[0]


def _products(layers: tuple[torch.nn.Module, ...], x: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's forward of `x`. Quantized layers share one conversion of `x` to their kernels' dtype,
    and skip their forward's checks for a prefill-sized pass (at most MAX_ROWS rows is never one)."""
    if not all(hasattr(layer, "narrow") for layer in layers):
        return [layer.forward(x) for layer in layers]
    rows = x.reshape(-1, x.shape[-1]).to(ACT)
    return [layer.narrow(rows, x.dtype).reshape(*x.shape[:-1], layer.out_features) for layer in layers]


def _rope(attn: torch.nn.Module) -> Callable | None:
    """The `apply_rotary_pos_emb` of the attention module's own modeling file, the one its forward calls."""
    return getattr(sys.modules.get(type(attn).__module__), "apply_rotary_pos_emb", None)
