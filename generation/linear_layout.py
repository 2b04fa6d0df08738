"""A faster layout for the small-M matmuls of speculative verification on CPU.

Verifying k draft tokens multiplies x[M, in] by W[out, in]^T with M = k+1 small. MKL's
sgemm for that row-major shape is slow at 2 <= M <= 32 (a 4-row F.linear can take 4x a
1-row one, though both read W once), while the same product computed as (W @ x^T)^T
stays close to the 1-row cost. Which is faster depends on the BLAS and the CPU, so
`patch_linear_layout` times both on one of the model's own weight matrices and patches
nn.Linear layers only when the transposed layout wins. Results differ from F.linear by
float rounding only (neither layout is batch invariant to begin with).
"""

from __future__ import annotations

import time
import types

import torch
import torch.nn.functional as F
from torch import nn

MAX_ROWS = 32  # above this (prefill) the stock kernel is efficient


def _transposed_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1]
    if not 2 <= rows <= MAX_ROWS:
        return F.linear(x, self.weight, self.bias)
    y = torch.mm(self.weight, x.reshape(rows, -1).t()).t()
    if self.bias is not None:
        y = y + self.bias
    return y.reshape(*x.shape[:-1], self.weight.shape[0])


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


@torch.inference_mode()
def transposed_layout_speedup(weight: torch.Tensor, rows: tuple[int, ...] = (4, 8, 16), repeats: int = 7) -> float:
    """Time of F.linear over time of the transposed layout, summed over a few row counts."""
    stock = transposed = 0.0
    for m in rows:
        x = torch.randn(m, weight.shape[1], dtype=weight.dtype, device=weight.device)
        stock += _median_seconds(lambda x=x: F.linear(x, weight), repeats)
        transposed += _median_seconds(lambda x=x: torch.mm(weight, x.t()).t(), repeats)
    return stock / transposed


def patch_linear_layout(model: nn.Module, mode: str = "auto") -> bool:
    """Use the transposed layout in every nn.Linear ("on"), never ("off"), or if faster ("auto")."""
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"linear layout mode must be auto, on or off, got {mode!r}")
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if mode == "off" or not linears:
        return False
    if mode == "auto":
        first = linears[0].weight
        if (
            first.device.type != "cpu"
            or transposed_layout_speedup(max((m.weight for m in linears[:8]), key=torch.Tensor.numel)) < 1.15
        ):
            return False
    for module in linears:
        module.forward = types.MethodType(_transposed_forward, module)
    return True
