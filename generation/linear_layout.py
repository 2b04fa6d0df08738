"""A faster layout for the small-M matmuls of speculative verification on CPU.

Verifying k draft tokens multiplies x[M, in] by W[out, in]^T with M = k+1 small. MKL's
sgemm for that row-major shape is slow at 2 <= M <= 32 (a 4-row F.linear can take 4x a
1-row one, though both read W once), while the same product computed as (W @ x^T)^T
stays close to the 1-row cost. Which is faster depends on the BLAS and the CPU, so
`patch_linear_layout` times both on one of the model's own weight matrices and uses the
transposed layout only from the row count at which it wins. Results differ from F.linear by
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
    if not self.transposed_min_rows <= rows <= MAX_ROWS:
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
def transposed_min_rows(
    weight: torch.Tensor, rows: tuple[int, ...] = (2, 3, 4, 6, 8, 16), repeats: int = 9
) -> int | None:
    """Smallest row count from which the transposed layout is faster for every larger count (None: never)."""
    wins = []
    for m in rows:
        x = torch.randn(m, weight.shape[1], dtype=weight.dtype, device=weight.device)
        stock = _median_seconds(lambda x=x: F.linear(x, weight), repeats)
        transposed = _median_seconds(lambda x=x: torch.mm(weight, x.t()).t(), repeats)
        wins.append(transposed < 0.9 * stock)
    for i, m in enumerate(rows):
        if all(wins[i:]):
            return m
    return None


def patch_linear_layout(model: nn.Module, mode: str = "auto") -> bool:
    """Use the transposed layout in every nn.Linear ("on"), never ("off"), or where it is faster ("auto")."""
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"linear layout mode must be auto, on or off, got {mode!r}")
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if mode == "off" or not linears:
        return False
    min_rows: int | None = 2
    if mode == "auto":
        if linears[0].weight.device.type != "cpu":
            return False
        min_rows = transposed_min_rows(max((m.weight for m in linears[:8]), key=torch.Tensor.numel))
        if min_rows is None:
            return False
    for module in linears:
        module.transposed_min_rows = min_rows
        module.forward = types.MethodType(_transposed_forward, module)
    return True


def kernel_layout(model: nn.Module) -> str:
    """Which layout the model's linear layers use, e.g. for cache keys: "stock" or "transposed>=N"."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and "forward" in vars(module):
            return f"transposed>={module.transposed_min_rows}"
    return "stock"
