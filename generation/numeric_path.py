"""Which numeric path runs the models on this machine: float weights, int4 or int8 kernels.

`none` is the models' own float weights (float32 on CPU: the reference path). `int4` and
`int8` are the weight-only quantized, batch-invariant CPU path (quantized.py). `int4-mlas`
is the same int4 weights on ONNX Runtime's kernels (mlas_linear.py): faster per pass, but it
holds about twice the memory, so `auto` never picks it and it is asked for by name. `auto`
picks, on CPU, whichever of float32 / int4 / int8 runs a model-sized matmul fastest for
1 and 8 rows (a decoding step and a typical verification pass), measured once per machine
and kept in the calibration file. On CUDA `auto` is always `none`: the GPU path stays as
it was. An explicit dtype (e.g. `--dtype float32`) also means `none`, so the reference
path is one flag away.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from core.hardware import cpu_name
from generation.cached_lm import CachedLM
from generation.calibration import measure_prefill_and_passes, measured_once
from generation.drafters.policy import PassCost, best_draft_length
from generation.errors import ModelError
from generation.llamacpp_lm import MAX_ROWS, LlamaCppLM
from generation.llamacpp_lm import available as llamacpp_available
from generation.mlas_linear import available as mlas_available
from generation.model_store import gguf_file, given_gguf, model_identity
from generation.path_choice import remember_auto_path
from generation.path_names import LLAMACPP, LLAMACPP_F16, LLAMACPP_PATHS, MLAS, PATHS
from generation.quantized import MIN_WIDE_ROWS, Int4Linear, Int8Linear

SHAPE = (8960, 1536)  # the default target's MLP projection
ROWS = (1, 8)


def resolve_path(
    path: str, device: torch.device, dtype: str, cache_file: Path | None, target: str | None = None
) -> str:
    """The concrete path ("none", "int4", "int8", "int4-mlas", "llamacpp" or "llamacpp-f16") for a requested one.

    `target`: the packaged model `auto` may run on llama.cpp (None: only the torch paths compete). Then the
    torch path and llama.cpp with either KV cache compete on a typical answer's projected seconds
    (`measure_answer_seconds`). A .gguf file given as `target` runs on llama.cpp with the faster cache."""
    if path not in PATHS:
        raise ModelError(f"unknown numeric path {path!r}; use one of {', '.join(PATHS)}")
    if path != "auto":
        if path != "none" and device.type != "cpu":
            raise ModelError(f"--quant {path} runs CPU kernels; use --device cpu or --quant none")
        if path == MLAS and not mlas_available():
            raise ModelError(f"--quant {MLAS} needs ONNX Runtime: pip install 'specrag[mlas]'")
        if path in LLAMACPP_PATHS and not llamacpp_available():
            raise ModelError(f"--quant {path} needs llama-cpp-python: pip install 'specrag[models]'")
        return path
    if device.type != "cpu" or dtype != "auto":
        return "none"
    chosen, kept = _fastest_on_cpu(cache_file, target)
    if target is not None and torch.get_num_threads() == fresh_process_threads():
        remember_auto_path(cache_file, target, chosen, kept)  # so a later process can read it without torch
    return chosen


@functools.cache
def fresh_process_threads() -> int:
    """torch's thread count in a new process with this environment: the one the torch-free record of `auto`'s
    choice (path_choice.light_key) stands for. A process that set its own count measures other paths' speeds:
    the test suite's 1 thread timed int4 at 21.8 s a typical answer against 14.5 s at 2, and its record had
    every later `specrag` on the AMX Xeon run llamacpp-f16 (session 62). Asked once, after a measurement."""
    probe = "import torch; print(torch.get_num_threads())"
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
        return int(done.stdout.strip())
    except (OSError, subprocess.SubprocessError, ValueError):
        return -1  # unknown: record nothing


def _fastest_on_cpu(cache_file: Path | None, target: str | None) -> tuple[str, bool]:
    """The fastest path, and whether the measurements behind it were kept (none was taken under load).

    A .gguf file given by its path runs on llama.cpp only (the torch paths build their weights from the packaged
    models' GGUFs), so its two KV caches compete alone, measured once for that file."""
    if target is not None and given_gguf(target) is not None:
        if not llamacpp_available():
            return "none", True  # load_models says what to install
        kind = f"{ANSWER_PATH}-gguf-{hashlib.sha256(model_identity(target).encode()).hexdigest()[:16]}"
        answer, kept = _cached_measurement(cache_file, kind, lambda: measure_llamacpp_kv(target))
        return min(answer, key=answer.get), kept
    costs, kept = _cached_measurement(cache_file, "path", measure_paths)
    torch_path = _int4_or_none(costs)
    if target is None or torch_path == "none" or not llamacpp_available():
        return torch_path, kept
    answer, kept_answer = _cached_measurement(
        cache_file, ANSWER_PATH, lambda: measure_answer_seconds(target, torch_path)
    )
    return min(answer, key=answer.get), kept and kept_answer


def _int4_or_none(costs: dict[str, float]) -> str:
    # int8 is not picked by auto: its weights are twice int4's, and on a loaded 2-core machine the
    # single-matrix timings of the two were within noise of each other (49 vs 54 ms)
    return "int4" if costs["int4"] < costs["none"] else "none"


# the calibration entry of the choice between the torch path and llama.cpp's two caches; "2" since session 43,
# when the torch path joined the typical-answer projection: before, it was compared with llama.cpp's
# row-invariant cache on one 1-row plus one 4-row pass, and the f16 cache, which decodes plainly, was not
# weighed once that cache lost (a 2-core AVX512-BF16 EPYC kept int4 at 5.27 s to the first token and
# 26.95 tok/s, where llamacpp-f16 gave 2.74 s and 28.66 tok/s); "3" since session 44, when the projection
# began to pay for the draft model's tokens (DRAFT_STEP)
ANSWER_PATH = "answer-path3"
TORCH_PASS_SIZES = (1, 2, 3, 4, 6, 8)  # the torch path verifies wider drafts than llama.cpp's 7 rows


def measure_answer_seconds(target: str, torch_path: str) -> dict[str, float]:
    """Projected seconds of a typical answer on the torch path and on llama.cpp with either KV cache, each
    from its own prefill and pass costs and the same draft model (`projected_answer_seconds`).

    The torch path's projection is still on the generous side: drafts at DRAFT_ACCEPTANCE, each drafted token
    costing DRAFT_STEP, project 1.33x on the AVX512-BF16 EPYC where session 43's bench measured 1.20x (the
    free draft tokens before session 44 projected 1.99x there). ~1 min once per machine: each runner loads
    the target once."""
    import gc

    from generation.models import load_quantized_models  # models imports this module

    answer = measure_llamacpp_kv(target)
    model = load_quantized_models(target, None, torch.device("cpu"), torch_path).target  # with its prefill plan
    lm = CachedLM(model, keep_snapshot=False)
    prefill, passes = measure_prefill_and_passes(lm, TORCH_PASS_SIZES, repeats=3, context=KV_CONTEXT)
    answer[torch_path] = round(projected_answer_seconds(prefill / KV_CONTEXT, passes), 3)
    del lm, model
    gc.collect()
    return answer


# A path is chosen by the projected seconds of a typical answer: the prefill of a first
# question's new tokens (893 in the web chat, README) plus an answer's decoding steps (102-137 tokens on
# average in the eval), each path's steps shortened by what drafts can buy on its own pass costs (the f16
# cache verifies none).
KV_PROMPT_TOKENS = 900
KV_ANSWER_TOKENS = 120
KV_CONTEXT = 640  # over 512 cached keys: where the f16 cache's one-row pass splits the keys across threads
DRAFT_ACCEPTANCE = 0.8  # per-token acceptance of the drafts the policy sent on the llamacpp path (0.81, README)
# what a drafted token costs, in target steps: the draft model's step (~0.3 of the target's in int4, README
# "Speculation pays"); an n-gram copy costs nothing, but counting it free projected 1.99x where 1.20x was measured
DRAFT_STEP = 0.3


def measure_llamacpp_kv(target: str) -> dict[str, float]:
    """Projected seconds of a typical answer on llamacpp (bf16 cache, speculative) and llamacpp-f16 (plain).

    The f16 cache prefills faster (llama.cpp's tiled flash attention takes it), but its rows depend on the
    pass width, so it decodes plainly; ~40 s once per machine (prefill timed once per cache)."""
    gguf = gguf_file(target)
    answer = {}
    for path in (LLAMACPP, LLAMACPP_F16):
        lm = LlamaCppLM(gguf, n_ctx=KV_CONTEXT + MAX_ROWS + 1, keep_snapshot=False, row_invariant=path == LLAMACPP)
        sizes = tuple(sorted({1, 2, 4, lm.max_pass_rows}))
        prefill, passes = measure_prefill_and_passes(lm, sizes, repeats=3, context=KV_CONTEXT)
        lm.close()
        answer[path] = round(projected_answer_seconds(prefill / KV_CONTEXT, passes), 3)
    return answer


def projected_answer_seconds(prefill_token_seconds: float, pass_seconds: dict[int, float]) -> float:
    """Prefill of KV_PROMPT_TOKENS plus KV_ANSWER_TOKENS decoded at the best rate drafts allow."""
    decode = KV_ANSWER_TOKENS * pass_seconds[1] / speculation_gain(pass_seconds)
    return KV_PROMPT_TOKENS * prefill_token_seconds + decode


def speculation_gain(
    pass_seconds: dict[int, float], acceptance: float = DRAFT_ACCEPTANCE, draft_step: float = DRAFT_STEP
) -> float:
    """Decoding speed with the best draft length over plain decoding's (>= 1), from measured pass costs.

    Uses the policy's own model (drafters/policy.py): k drafted tokens, each accepted with `acceptance` and
    costing `draft_step` target steps to draft, verified in one pass of k + 1 rows, up to the widest pass
    measured."""
    cost = PassCost({n: seconds / pass_seconds[1] for n, seconds in pass_seconds.items()})
    _, rate = best_draft_length(acceptance, cost, draft_step * cost(1), max(pass_seconds) - 1)
    return rate * cost(1)


@torch.inference_mode()
def measure_paths(repeats: int = 3) -> dict[str, float]:
    """Seconds for a 1-row plus an 8-row product through each path's kernel (min of interleaved repeats).

    The caches are flushed before every timing: a model's weights stream from memory on every pass,
    but this machine's 300 MB L3 holds one 55 MB float32 matrix, which made float32 look fastest."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(SHAPE, generator=generator) * 0.02
    layers = {
        "none": lambda x: F.linear(x, weight),
        "int4": Int4Linear.from_float(weight, None),
        "int8": Int8Linear.from_float(weight, None),
    }
    inputs = [torch.randn(rows, SHAPE[1], generator=generator) for rows in ROWS]
    flush = torch.ones(_cache_bytes() // 2, dtype=torch.float16)
    best = {(name, i): float("inf") for name in layers for i in range(len(ROWS))}
    for _ in range(repeats):
        for (name, i), seconds in best.items():
            flush.sum()
            best[name, i] = min(seconds, _seconds(layers[name], inputs[i]))
    return {name: sum(best[name, i] for i in range(len(ROWS))) for name in layers}


WIDE_PROBE = (128, 1024)  # rows: one short and one long prefill
MAX_WIDE_ROWS = 8192
# the calibration entry of the prefill plan; "2" since dequantization became ~3x faster (session 9),
# which moves the crossover, so plans measured before are measured again
WIDE_PLAN = "wide-plan2"


def cached_wide_plan(cache_file: Path | None) -> tuple[torch.dtype, int]:
    """How prefill-sized passes run here: the dequantized matmul's dtype, and the row count from which it
    beats the int4 kernel (measured once, cached)."""
    plan = cached_measurement(cache_file, WIDE_PLAN, measure_wide_plan)
    return getattr(torch, plan["dtype"]), int(plan["rows"])


def measure_wide_plan(repeats: int = 5) -> dict[str, Any]:
    dtype = faster_matmul_dtype()
    return {"dtype": str(dtype).removeprefix("torch."), "rows": measure_wide_rows(repeats, dtype)}


@torch.inference_mode()
def faster_matmul_dtype(repeats: int = 2) -> torch.dtype:
    """bf16 where its stock matmul is at least as fast as float32's, else float32 (CPUs without bf16 units)."""
    x, w = torch.randn(32, SHAPE[1]), torch.randn(SHAPE[1], 1024)
    seconds = {}
    for dtype in (torch.bfloat16, torch.float32):
        xd, wd = x.to(dtype), w.to(dtype)
        seconds[dtype] = min(_seconds(lambda x, w=wd: torch.mm(x, w), xd) for _ in range(repeats))
    return torch.bfloat16 if seconds[torch.bfloat16] <= seconds[torch.float32] else torch.float32


def cached_measurement(cache_file: Path | None, kind: str, measure: Callable[[], Any]) -> Any:
    """`measure()` once per machine (CPU, threads, torch), kept in the calibration file under `kind:key`."""
    return _cached_measurement(cache_file, kind, measure)[0]


def _cached_measurement(cache_file: Path | None, kind: str, measure: Callable[[], Any]) -> tuple[Any, bool]:
    """The measurement, and whether it is kept (calibration.measured_once)."""
    return measured_once(cache_file, f"{kind}:{machine_key()}", measure, f"the {kind} measurement")


@torch.inference_mode()
def measure_wide_rows(repeats: int = 5, dtype: torch.dtype = torch.bfloat16) -> int:
    """Fit kernel(M) = a M and dequantized(M) = D + b M on two row counts; the crossover is D / (a - b).

    The int4 kernel re-reads the weight for every block of 4 rows, so its cost grows with M from the
    first row; the dequantized path pays D once per pass, then runs the stock matmul in `dtype`.
    Where that matmul grows faster than the kernel, it never wins (MAX_WIDE_ROWS)."""
    layer = Int4Linear.from_float(torch.randn(SHAPE, generator=torch.Generator().manual_seed(0)) * 0.02, None)
    kernel, dequantized = [], []
    for rows in WIDE_PROBE:
        x = torch.randn(rows, SHAPE[1]).to(torch.bfloat16)
        k = min(
            _seconds(
                lambda x: torch.ops.aten._weight_int4pack_mm_for_cpu(x, layer.packed, layer.group, layer.scales_zeros),
                x,
            )
            for _ in range(repeats)
        )
        d = min(_seconds(lambda x: torch.mm(x.to(dtype), layer.dequantized_t(dtype)), x) for _ in range(repeats))
        kernel.append(k)
        dequantized.append(d)
    (m1, m2) = WIDE_PROBE
    a = kernel[1] / m2
    b = (dequantized[1] - dequantized[0]) / (m2 - m1)
    fixed = dequantized[0] - b * m1
    if a <= b:
        return MAX_WIDE_ROWS
    if fixed <= 0:
        return MIN_WIDE_ROWS
    return int(min(max(fixed / (a - b), MIN_WIDE_ROWS), MAX_WIDE_ROWS))


def _cache_bytes() -> int:
    """Twice the largest CPU cache (at least 64 MB), from sysfs where available."""
    sizes = [32 << 20]
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KM")) * scale)
    return 2 * max(sizes)


def machine_key() -> str:
    parts = [cpu_name(), str(torch.get_num_threads()), torch.__version__]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _seconds(fn, x: torch.Tensor) -> float:
    start = time.perf_counter()
    fn(x)
    return time.perf_counter() - start
