"""Loading the target and draft models: resolve names, pick device and dtype, check vocab.

A model name is `default-target` / `default-draft` (the packaged GGUFs, converted once
into the cache), a local Hugging Face model directory, or a hub id for users who have a
network. Target and draft must tokenize identically or their drafts cannot be verified.

torch and transformers are imported only where a torch model is loaded: on the llama.cpp paths
the process never imports them (~220 MB of resident memory; see path_choice.py).
"""

from __future__ import annotations

import filecmp
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.paths import cache_root
from generation.errors import ModelError, VocabularyMismatchError
from generation.llamacpp_lm import LlamaCppLM, vocabulary_tokenizer
from generation.llamacpp_lm import available as llamacpp_available
from generation.model_store import (
    PACKAGED,
    assembled_gguf,
    ensure_packaged_model,
    ensure_quantized_model,
    gguf_file,
    given_gguf,
)
from generation.path_choice import cpu_only, remembered_auto_path
from generation.path_names import LLAMACPP, LLAMACPP_F16, LLAMACPP_PATHS, MLAS

if TYPE_CHECKING:  # modeling_utils: 128 MB and 3 s to import, loaded by the first torch model, not before
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from generation.gguf_tokenizer import GgufTokenizer

DTYPES = ("float32", "bfloat16", "float16")
VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model")
TOKENIZER_FILES = (
    *VOCABULARY_FILES,
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)


@dataclass
class LoadedModels:
    target: PreTrainedModel | LlamaCppLM
    tokenizer: PreTrainedTokenizerBase | GgufTokenizer
    draft: PreTrainedModel | LlamaCppLM | None
    target_path: str
    draft_path: str | None
    device: Any  # a torch.device; "cpu" on llama.cpp
    draft_int8: bool = False
    linear_layout_patched: bool = False
    quant: str = "none"  # the numeric path both models run on: none (float weights), int4, int8


def resolve_model(name: str) -> str:
    """A loadable path or hub id for a model name."""
    if name in PACKAGED:
        return str(ensure_packaged_model(name))
    if name.startswith((".", "/", "~")) and not Path(name).expanduser().is_dir():
        raise ModelError(f"model directory {name} does not exist; pass a Hugging Face model folder or a hub id")
    return str(Path(name).expanduser()) if Path(name).expanduser().is_dir() else name


def pick_device(device: str = "auto") -> torch.device:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {device} was asked for but CUDA is not available; use --device cpu")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """auto: float32 on CPU, bf16/fp16 on GPU.

    On AMX CPUs bf16 is much faster (here 0.25 s for a pass of 1 to 16 tokens, against 0.37 s
    to 0.94 s in float32), but not exact enough: its logits come in steps of 1/16-1/8, so a
    16-token pass and a 1-token pass often round a near-tie differently. On the 10-question
    benchmark in bf16, every speculative method (transformers' too) diverged from plain bf16
    greedy on 1-2 questions at margins of 0-0.125. float32 keeps the token-for-token promise.
    """
    import torch

    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype {dtype!r}; use one of auto, {', '.join(DTYPES)}")
    return getattr(torch, dtype)


def load_causal_lm(path: str, device: torch.device, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except OSError as err:
        raise ModelError(f"cannot load a causal LM from {path}: {err}") from err
    return model.to(device).eval()


def check_same_vocabulary(
    target_tok: PreTrainedTokenizerBase | GgufTokenizer,
    draft_tok: PreTrainedTokenizerBase | GgufTokenizer,
    target: PreTrainedModel | LlamaCppLM,
    draft: PreTrainedModel | LlamaCppLM,
) -> None:
    """Refuse a draft whose token ids mean something else than the target's."""
    t_size, d_size = scored_tokens(target), scored_tokens(draft)
    if t_size != d_size:
        raise VocabularyMismatchError(
            f"target and draft models must share a vocabulary: the target scores {t_size} tokens, "
            f"the draft {d_size}; pick a draft model of the same family"
        )
    if target_tok.get_vocab() != draft_tok.get_vocab():
        raise VocabularyMismatchError(
            "target and draft models must share a vocabulary: their tokenizers map tokens to different ids; "
            "pick a draft model of the same family, or --draft none"
        )


def draft_tokenizer(target_path: str, draft_path: str, tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """The draft's tokenizer, for the vocabulary check: the target's own where both model folders hold the
    same tokenizer files byte for byte (a second Qwen tokenizer kept ~55 MB of resident memory after the
    check and ~95 MB while it ran), else the draft's, loaded."""
    if same_tokenizer_files(Path(target_path), Path(draft_path)):
        return tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(draft_path)


def same_tokenizer_files(first: Path, second: Path) -> bool:
    """Do two model folders define their tokenizer with identical files (and do they define one)?"""
    if not (first.is_dir() and second.is_dir()):  # a hub id: its files are not here to compare
        return False
    names = [name for name in TOKENIZER_FILES if (first / name).is_file() or (second / name).is_file()]
    if not any(name in names for name in VOCABULARY_FILES):
        return False
    return all(
        (first / n).is_file() and (second / n).is_file() and filecmp.cmp(first / n, second / n, shallow=False)
        for n in names
    )


def scored_tokens(model: PreTrainedModel | LlamaCppLM) -> int:
    """How many tokens a model's logits score."""
    return model.vocab_size if isinstance(model, LlamaCppLM) else model.get_output_embeddings().out_features


def quantize_draft_int8(model: PreTrainedModel) -> PreTrainedModel:
    """Dynamic int8 weights for the draft's linear layers (CPU only).

    Safe for exactness: the draft only proposes, and its proposal distribution q is
    computed by the quantized model that actually samples the draft. It cuts a draft
    step several fold on a memory-bound CPU.
    """
    import warnings

    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # per-output-channel weight scales: per-tensor scales lose too much on a 0.5B model
        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)


def load_quantized_lm(name: str, mode: str, draft: bool = False) -> tuple[PreTrainedModel, str]:
    """A model on the int4/int8 path and its directory: packaged models straight from their GGUF
    (cached, no float32 copy); other models are loaded in float32 once and quantized in memory.
    A packaged draft on the int4 path has every matrix in int4 (quantized_model.DRAFT_INT4)."""
    import torch

    from generation.quantized_model import DRAFT_INT4, load_quantized, quantize_module_tree

    if name in PACKAGED:
        path = ensure_quantized_model(name, DRAFT_INT4 if draft and mode == "int4" else mode)
        return load_quantized(path), str(path)
    path = resolve_model(name)
    return quantize_module_tree(load_causal_lm(path, torch.device("cpu"), torch.float32), mode), path


def load_models(
    target: str = "default-target",
    draft: str | None = "default-draft",
    device: str = "auto",
    dtype: str = "auto",
    draft_int8: str = "auto",
    linear_layout: str = "off",
    quant: str = "auto",
    context: int | None = None,
) -> LoadedModels:
    """Load target (+ draft). draft_int8 / linear_layout: "auto" (CPU only), "on" or "off".

    context: positions of a llama.cpp context, at most LLAMACPP_CONTEXT (None: that); the torch paths ignore it.

    quant: the numeric path, "auto" | "int4" | "int8" | "int4-mlas" | "none" (numeric_path.py). "auto" is the
    fastest measured path for the packaged models on a CPU with dtype "auto" (for a .gguf file given by its path:
    llama.cpp with the faster KV cache, measured once for that file), else "none"; on int4/int8 both models
    run the quantized, batch-invariant kernels and `dtype`, draft_int8, linear_layout are unused.
    The transposed layout is off by default: in whole-model passes on this 2-core CPU the
    stock kernel was as fast or faster (r(2..3) = 1.0 stock vs 1.18 transposed).
    """
    own_gguf = given_gguf(target)
    if own_gguf is not None and not own_gguf.is_file():
        raise ModelError(f"the model file {target} does not exist: pass a .gguf file, a model folder or a hub id")
    if quant == "auto" and target not in PACKAGED and own_gguf is None:
        quant = "none"  # a model given as a folder or hub id runs on its own weights unless a path is asked for
    calibration = cache_root() / "calibration.json"
    known = remembered_auto_path(calibration, target, device, dtype) if quant == "auto" else quant
    if known in LLAMACPP_PATHS and cpu_only(device) and llamacpp_available():  # no torch in this process
        return load_llamacpp_models(target, draft, row_invariant=known == LLAMACPP, context=context)
    from transformers import AutoTokenizer

    from generation.linear_layout import patch_linear_layout
    from generation.numeric_path import resolve_path

    dev = pick_device(device)
    path = resolve_path(quant, dev, dtype, calibration, target if target in PACKAGED or own_gguf else None)
    if path in LLAMACPP_PATHS:
        return load_llamacpp_models(target, draft, row_invariant=path == LLAMACPP, context=context)
    for name in (target, draft):
        if name and given_gguf(name) is not None:
            raise ModelError(gguf_path_error(name, path))
    if path != "none":
        return load_quantized_models(target, draft, dev, path)
    import torch

    torch_dtype = pick_dtype(dtype, dev)
    target_path = resolve_model(target)
    tokenizer = AutoTokenizer.from_pretrained(target_path)
    target_model = load_causal_lm(target_path, dev, torch_dtype)
    patched = patch_linear_layout(target_model, linear_layout if dev.type == "cpu" else "off")
    draft_model, draft_path, int8 = None, None, False
    if draft:
        draft_path = resolve_model(draft)
        # On CPU the int8 draft (float32 activations) is the fastest drafter whatever the target's dtype
        int8 = dev.type == "cpu" and draft_int8 in ("auto", "on")
        draft_model = load_causal_lm(draft_path, dev, torch.float32 if int8 else torch_dtype)
        check_same_vocabulary(tokenizer, draft_tokenizer(target_path, draft_path, tokenizer), target_model, draft_model)
        if int8:
            draft_model = quantize_draft_int8(draft_model)
    return LoadedModels(target_model, tokenizer, draft_model, target_path, draft_path, dev, int8, patched)


def load_quantized_models(target: str, draft: str | None, dev: torch.device, mode: str) -> LoadedModels:
    """Target and draft on the int4/int8 path (the draft too: its bf16-activation kernels are
    the fastest drafter measured here, and a draft only proposes, so exactness is unaffected)."""
    from transformers import AutoTokenizer

    from generation.mlas_linear import to_mlas, use_cores_for_mlas
    from generation.numeric_path import cached_wide_plan
    from generation.quantized import set_int4_wide_rows, set_wide_dtype

    mlas, weights = mode == MLAS, "int4" if mode == MLAS else mode
    if not mlas:
        wide_dtype, wide_rows = cached_wide_plan(cache_root() / "calibration.json")
        set_wide_dtype(wide_dtype)
        if mode == "int4":
            set_int4_wide_rows(wide_rows)
    else:
        use_cores_for_mlas()
    target_model, target_path = load_quantized_lm(target, weights)
    tokenizer = packaged_vocabulary(target) or AutoTokenizer.from_pretrained(target_path)
    draft_model, draft_path = None, None
    if draft:
        draft_model, draft_path = load_quantized_lm(draft, weights, draft=True)
        check_same_vocabulary(tokenizer, draft_tokenizer(target_path, draft_path, tokenizer), target_model, draft_model)
    if mlas:  # the int4 models (cached as they are for the int4 path) moved onto ONNX Runtime's kernels
        target_model = to_mlas(target_model)
        draft_model = None if draft_model is None else to_mlas(draft_model)
    return LoadedModels(target_model, tokenizer, draft_model, target_path, draft_path, dev, quant=mode)


def packaged_vocabulary(name: str) -> GgufTokenizer | None:
    """A packaged model's tokenizer read from its GGUF by llama.cpp, which `specrag ask` holds in ~48 MB where
    transformers' tokenizer of the same vocabulary takes ~130 MB (it tokenizes the llama.cpp paths already);
    None for other models, without llama.cpp, or where the GGUF is no longer in the cache (assembling it again
    would write 1 GB to read a vocabulary that the int4 cache holds too)."""
    gguf = assembled_gguf(name)
    if gguf is None or not llamacpp_available():
        return None
    return vocabulary_tokenizer(gguf)


def load_llamacpp_models(
    target: str, draft: str | None, row_invariant: bool = True, context: int | None = None
) -> LoadedModels:
    """Target and draft as GGUF files on llama.cpp (llamacpp_lm.py), with the target GGUF's tokenizer.

    Nothing is converted: the GGUF files are the weights, mapped from disk, and their own vocabularies
    tokenize (gguf_tokenizer.py). Without row invariance (the f16 KV cache) the target verifies no
    drafts, so no draft model is loaded."""
    target_gguf = _gguf_or_error(target)
    n_ctx = min(context or LLAMACPP_CONTEXT, LLAMACPP_CONTEXT)
    target_lm = LlamaCppLM(target_gguf, n_ctx=n_ctx, row_invariant=row_invariant)
    tokenizer = target_lm.tokenizer()
    draft_lm, draft_path = None, None
    if draft and row_invariant:
        draft_gguf = _gguf_or_error(draft)
        draft_lm, draft_path = LlamaCppLM(draft_gguf, n_ctx=n_ctx), str(draft_gguf)
        check_same_vocabulary(tokenizer, draft_lm.tokenizer(), target_lm, draft_lm)
    path = LLAMACPP if row_invariant else LLAMACPP_F16
    return LoadedModels(target_lm, tokenizer, draft_lm, str(target_gguf), draft_path, "cpu", quant=path)


def gguf_path_error(name: str, path: str) -> str:
    """Why a .gguf file given as the target or draft did not load on `path`, and what to run instead."""
    how = (
        "pip install 'specrag[models]' for llama-cpp-python"
        if not llamacpp_available()
        else "run it with --quant auto, llamacpp or llamacpp-f16 on the CPU, without --dtype"
    )
    return f"{name} is a GGUF file: it runs as it is on llama.cpp, not on the {path} path; {how}"


LLAMACPP_CONTEXT = (
    8192  # positions per llama.cpp context: a long conversation (a bf16 KV cache of 230 MB for the target)
)


def _gguf_or_error(name: str) -> Path:
    path = gguf_file(name)
    if path is None or not path.exists():
        raise ModelError(
            f"--quant {'/'.join(LLAMACPP_PATHS)} run GGUF files: pass a packaged model or a path to a .gguf "
            f"file, not {name}"
        )
    return path
