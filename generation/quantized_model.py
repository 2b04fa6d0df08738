"""A quantized causal LM that keeps the Hugging Face module tree, built from a GGUF or a cache.

`quantize_module_tree` swaps every nn.Linear of a model for an Int4Linear / Int8Linear
(see quantized.py). `build_from_gguf` does the same straight from a GGUF file: the model is
created on the meta device, so no float32 copy of its weights ever exists; each Q4_K
matrix maps to int4 group-32 without re-quantizing (quantized.py), other types (Q6_K,
Q8_0, Q5_0) go to per-channel int8, and a Q4_K embedding table stays packed. The result
is saved once as safetensors (`save_quantized` / `load_quantized`), ~1.1 GB for the
default 1.5B target instead of 6.7 GB of float32.

Attention is invariant_attention.py's: every query row of a decoding pass is computed as
if it were alone, which eager and SDPA attention do not guarantee.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

from generation.gated_mlp import GATED_MLPS, GatedMLP
from generation.gguf_blocks import GGUFTensors, q4k_groups
from generation.invariant_attention import NAME as INVARIANT_ATTENTION
from generation.invariant_attention import register_invariant_attention
from generation.path_names import MLAS  # the int4 weights on ONNX Runtime's kernels (mlas_linear.py)
from generation.quantized import HalfEmbedding, Int4Linear, Int8Linear, Q4KEmbedding

if TYPE_CHECKING:  # modeling_utils: 128 MB and 3 s to import; the llama.cpp path imports this module, not it
    from transformers import PreTrainedModel

QUANT_MODES = ("int4", "int8")
# A draft model's build: every matrix the int4 kernel can tile goes to int4, re-quantized from the
# GGUF's Q5_0 / Q8_0 / Q6_K values where it is not Q4_K. The draft only proposes and the target
# decides, so a coarser draft cannot change an answer, only how many drafted tokens are accepted.
# The default draft's 896-wide rows do not fit Q4_K's 256-weight blocks, so its GGUF holds most
# matrices in Q5_0 / Q8_0: as per-channel int8 a draft step cost as much as a target step here.
DRAFT_INT4 = "int4-all"
WEIGHTS = "quantized.safetensors"
LAYER_NAMES = {  # Hugging Face suffix -> GGUF tensor name, for the llama/qwen2 layout
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def gguf_name(hf_name: str) -> str:
    """HF module name -> GGUF tensor prefix (without .weight/.bias)."""
    if hf_name == "lm_head":
        return "output"
    if hf_name == "model.embed_tokens":
        return "token_embd"
    if hf_name == "model.norm":
        return "output_norm"
    parts = hf_name.split(".")  # model.layers.{i}.{suffix}
    return f"blk.{parts[2]}.{LAYER_NAMES['.'.join(parts[3:])]}"


def quantized_linear(weight: torch.Tensor, bias: torch.Tensor | None, mode: str) -> nn.Module:
    """One float weight -> Int4Linear (groups of 32) or Int8Linear (per channel)."""
    if mode == "int4" and weight.shape[1] % 32 == 0 and weight.shape[0] % 16 == 0:  # the kernel's tiling
        return Int4Linear.from_float(weight, bias)
    return Int8Linear.from_float(weight, bias)


def quantize_module_tree(model: PreTrainedModel, mode: str = "int4", skip: tuple[str, ...] = ()) -> PreTrainedModel:
    """Swap every nn.Linear (except names in `skip`) for a quantized one, in place; eager attention."""
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear) and name not in skip:
            weight = module.weight.detach().float()
            bias = module.bias.detach() if module.bias is not None else None
            replace_module(model, name, quantized_linear(weight, bias, mode))
    use_gated_mlps(model)
    register_invariant_attention()
    model.config._attn_implementation = INVARIANT_ATTENTION
    for param in model.parameters():  # norms and embeddings stay float (not .float(): it would cast the bf16 scales)
        param.data = param.data.float()
    return model.eval()


def build_from_gguf(gguf: Path, config: PretrainedConfig, mode: str = "int4") -> PreTrainedModel:
    """The model with every weight taken from `gguf`, never materialising float32 matrices."""
    tensors = GGUFTensors(gguf)
    model = _empty_model(config)
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear):
            replace_module(model, name, _linear_from_gguf(tensors, name, module, mode))
        elif isinstance(module, nn.Embedding):
            replace_module(model, name, _embedding_from_gguf(tensors, name, module))
        elif hasattr(module, "weight") and isinstance(module.weight, nn.Parameter):  # RMSNorm
            module.weight = nn.Parameter(tensors.floats(gguf_name(name) + ".weight"), requires_grad=False)
    return _finish(model)


def save_quantized(model: PreTrainedModel, directory: Path) -> None:
    """config.json + quantized.safetensors, with the layer kinds in the file's metadata."""
    kinds = {n: type(m).__name__ for n, m in model.named_modules() if type(m) in _KINDS.values()}
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    model.config.save_pretrained(directory)
    save_file(state, str(directory / WEIGHTS), metadata={"kinds": json.dumps(kinds)})


def load_quantized(directory: Path) -> PreTrainedModel:
    """The model saved by save_quantized, built on meta and filled from the file (no float copy)."""
    state, metadata = read_safetensors(directory / WEIGHTS, mapped=embedding_tables)
    kinds = json.loads(metadata["kinds"])
    model = _empty_model(AutoConfig.from_pretrained(directory))
    for name, kind in kinds.items():
        old = model.get_submodule(name)
        replace_module(model, name, _empty_like(kind, old, state, name))
    model.load_state_dict(state, strict=False, assign=True)
    return _finish(model)


_DTYPES = {
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "F32": torch.float32,
    "U8": torch.uint8,
    "I8": torch.int8,
    "I32": torch.int32,
    "I64": torch.int64,
}


def read_safetensors(
    path: Path, mapped: Callable[[dict[str, str]], set[str]] = lambda metadata: set()
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Every tensor read into its own fresh (aligned) buffer with plain file reads, except those
    `mapped(metadata)` names, which stay views of the file's mapping (paged in as they are read).

    Not safetensors' loader for the rest: its mmap-backed views sat at any byte offset (torch's int8
    kernel crashed on one at offset 42), and copying them out of the mapping kept both resident while
    loading (peak RSS 3.2 GB for 2.0 GB of target and draft weights)."""
    state = {}
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        metadata = header.pop("__metadata__", {})
        in_mapping = mapped(metadata)
        for name, info in header.items():
            if name in in_mapping:
                continue
            tensor = torch.empty(info["shape"], dtype=_DTYPES[info["dtype"]])
            start, end = info["data_offsets"]
            f.seek(8 + size + start)
            if f.readinto(tensor.view(torch.uint8).reshape(-1).numpy()) != end - start:
                raise ValueError(f"{path} is truncated at tensor {name}; delete its folder to rebuild it")
            state[name] = tensor
    if in_mapping:
        try:
            with safe_open(str(path), "pt") as weights:
                state.update({name: weights.get_tensor(name) for name in in_mapping})
        except SafetensorError as err:  # e.g. a file cut short within the mapped tensor
            raise ValueError(f"{path} cannot be mapped ({err}); delete its folder to rebuild it") from err
    return state, metadata


# An embedding lookup reads one row per token, so a table left in the file's mapping costs only the
# rows a process uses: a few MB, not the 0.26 GB of the default draft's bf16 table or the 0.13 GB of
# the target's Q4_K one (gathers need no alignment, unlike the matmul kernels above).
_TABLE_BUFFERS = {"Q4KEmbedding": "blocks", "HalfEmbedding": "table"}


def embedding_tables(metadata: dict[str, str]) -> set[str]:
    """The embedding tables' buffer names among a saved model's tensors (from its metadata's layer kinds)."""
    kinds = json.loads(metadata.get("kinds", "{}"))
    return {f"{name}.{_TABLE_BUFFERS[kind]}" for name, kind in kinds.items() if kind in _TABLE_BUFFERS}


_KINDS = {
    "Int4Linear": Int4Linear,
    "Int8Linear": Int8Linear,
    "Q4KEmbedding": Q4KEmbedding,
    "HalfEmbedding": HalfEmbedding,
}


def _empty_like(kind: str, old: nn.Module, state: dict[str, torch.Tensor], name: str) -> nn.Module:
    if kind in ("Q4KEmbedding", "HalfEmbedding"):
        return _KINDS[kind](old.num_embeddings, old.embedding_dim)
    return _KINDS[kind](old.in_features, old.out_features, f"{name}.bias" in state)


def _empty_model(config: PretrainedConfig) -> PreTrainedModel:
    with torch.device("meta"):
        register_invariant_attention()
        return AutoModelForCausalLM.from_config(config, attn_implementation=INVARIANT_ATTENTION, dtype=torch.float32)


def _finish(model: PreTrainedModel) -> PreTrainedModel:
    """Recreate buffers that were computed on the meta device (rotary frequencies) on the CPU."""
    for name, module in list(model.named_modules()):
        if any(b is not None and b.is_meta for b in module.buffers(recurse=False)):
            with torch.device("cpu"):
                replace_module(model, name, type(module)(model.config))
    leftover = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if leftover:
        raise ValueError(f"quantized model has weights missing: {leftover[:3]}")
    return use_gated_mlps(model).eval()


def _linear_from_gguf(tensors: GGUFTensors, name: str, module: nn.Linear, mode: str) -> nn.Module:
    base = gguf_name(name)
    if base == "output" and "output.weight" not in tensors:
        base = "token_embd"  # tied output head
    bias = tensors.floats(base + ".bias") if base + ".bias" in tensors else None
    kind = tensors.kind(base + ".weight").name
    if mode in ("int4", DRAFT_INT4) and kind == "Q4_K":
        return Int4Linear.from_groups(*q4k_groups(tensors.raw(base + ".weight")), bias)
    if mode == DRAFT_INT4:
        return quantized_linear(tensors.floats(base + ".weight"), bias, "int4")
    # Q6_K / Q8_0 / Q5_0 carry more than 4 bits: per-channel int8 keeps them closest
    return Int8Linear.from_float(tensors.floats(base + ".weight"), bias)


def _embedding_from_gguf(tensors: GGUFTensors, name: str, module: nn.Embedding) -> nn.Module:
    base = gguf_name(name) + ".weight"
    if tensors.kind(base).name == "Q4_K":
        table = Q4KEmbedding(module.num_embeddings, module.embedding_dim)
        table.blocks = torch.from_numpy(tensors.raw(base).copy())
        return table
    table = HalfEmbedding(module.num_embeddings, module.embedding_dim)
    table.table = tensors.floats(base).to(torch.bfloat16)
    return table


def use_gated_mlps(model: nn.Module) -> nn.Module:
    """Swap every Qwen2/Llama-style MLP of `model` for a GatedMLP holding the same layers (same state dict)."""
    for name, module in list(model.named_modules()):
        if type(module).__name__ in GATED_MLPS:
            replace_module(model, name, GatedMLP(module))
    return model


def replace_module(model: nn.Module, name: str, new: nn.Module) -> None:
    """Put `new` where the submodule called `name` is."""
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, new)


def numeric_path(model: nn.Module) -> str:
    """ "int4-mlas" / "int4" / "int8" for a model on a quantized path (by its widest kind of layer), else "none"."""
    from generation.mlas_linear import MlasLinear

    kinds = {type(m) for m in model.modules()}
    if MlasLinear in kinds:
        return MLAS
    return "int4" if Int4Linear in kinds else "int8" if Int8Linear in kinds else "none"
