"""The few array operations generation needs, on the logits of either kind of runner.

A transformers model gives torch tensors; llama.cpp (llamacpp_lm.py) gives numpy arrays, so a
process that runs only llama.cpp (`specrag ask` on the default path) never imports torch, whose
libraries alone are ~220 MB of its resident memory. Tensors keep torch's own kernels; arrays get
the same arithmetic in numpy. A generator follows its runner: a torch.Generator beside torch
logits, a numpy Generator beside numpy ones. Everything a decision depends on is a pure function
of the logits, so plain and speculative decoding on one runner still see the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Logits = Any  # np.ndarray | torch.Tensor, [..., V]
Generator = Any  # np.random.Generator | torch.Generator | None


def runs_on_numpy(runner: object) -> bool:
    """Does this runner hand out numpy logits (llama.cpp) rather than torch tensors?"""
    return getattr(runner, "array_library", "torch") == "numpy"


def new_generator(runner: object, seed: int) -> Generator:
    """A seeded generator of the kind the runner's logits are sampled with."""
    if runs_on_numpy(runner):
        return np.random.default_rng(seed)
    import torch

    return torch.Generator(device=runner.device).manual_seed(seed)


def random_tokens(runner: object, vocab: int, count: int, seed: int) -> list[int]:
    """`count` token ids drawn uniformly below `vocab` (calibration contexts)."""
    if runs_on_numpy(runner):
        return np.random.default_rng(seed).integers(0, vocab, count).tolist()
    import torch

    return torch.randint(0, vocab, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def float32(x: Logits) -> Logits:
    return x.astype(np.float32, copy=False) if isinstance(x, np.ndarray) else x.float()


def one_hot_argmax(logits: Logits) -> Logits:
    """Rows with 1 at each row's argmax, 0 elsewhere (float32)."""
    if isinstance(logits, np.ndarray):
        out = np.zeros(logits.shape, dtype=np.float32)
        np.put_along_axis(out, logits.argmax(-1)[..., None], 1.0, axis=-1)
        return out
    import torch

    return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)


def softmax(x: Logits) -> Logits:
    if isinstance(x, np.ndarray):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return x.softmax(-1)


def log_softmax(x: Logits) -> Logits:
    if isinstance(x, np.ndarray):
        shifted = x - x.max(-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return x.log_softmax(-1)


def keep_top_k(logits: Logits, k: int) -> Logits:
    """Logits below the k-th largest of their row set to -inf."""
    if isinstance(logits, np.ndarray):
        kth = -np.partition(-logits, k - 1, axis=-1)[..., k - 1 : k]
        return np.where(logits < kth, -np.inf, logits).astype(np.float32, copy=False)
    import torch

    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def keep_top_p(logits: Logits, top_p: float) -> Logits:
    """Drop a token once the mass of the likelier ones already reaches top_p (the top token always stays)."""
    if isinstance(logits, np.ndarray):
        order = np.argsort(-logits, axis=-1, kind="stable")
        sorted_logits = np.take_along_axis(logits, order, axis=-1)
        mass = softmax(sorted_logits)
        drop_sorted = (np.cumsum(mass, axis=-1) - mass) >= top_p
        drop = np.empty_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        return np.where(drop, -np.inf, logits).astype(np.float32, copy=False)
    import torch

    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    mass = sorted_logits.softmax(-1)
    drop_sorted = (mass.cumsum(-1) - mass) >= top_p
    return logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))


def top_indices(row: Logits, k: int) -> list[int]:
    """The ids of a 1-D row's k largest values, largest first."""
    k = min(k, row.shape[-1])
    if isinstance(row, np.ndarray):
        part = np.argpartition(-row, k - 1)[:k]
        return part[np.argsort(-row[part], kind="stable")].tolist()
    import torch

    return torch.topk(row, k).indices.tolist()


def top_two_gap(row: Logits) -> float:
    """The largest value of a 1-D row minus the second largest."""
    first, second = top_indices(float32(row), 2)
    return float(row[first]) - float(row[second])


def sample(probs: Logits, generator: Generator) -> int:
    """Draw one token id from a 1-D distribution (it need not sum to exactly 1)."""
    if isinstance(probs, np.ndarray):
        cumulative = np.cumsum(probs, dtype=np.float64)
        # the first id whose cumulative mass exceeds u * total: a zero-mass id never is
        return int(np.searchsorted(cumulative, uniform(generator) * cumulative[-1], side="right"))
    import torch

    return int(torch.multinomial(probs, 1, generator=generator).item())


def uniform(generator: Generator) -> float:
    """One draw from U[0, 1)."""
    if isinstance(generator, np.random.Generator):
        return float(generator.random())
    import torch

    return torch.rand((), generator=generator, device=generator.device if generator is not None else "cpu").item()


def without(p: Logits, token: int) -> Logits:
    """A copy of p with p[token] = 0."""
    out = p.copy() if isinstance(p, np.ndarray) else p.clone()
    out[token] = 0.0
    return out


def positive_part(x: Logits) -> Logits:
    """max(0, x), elementwise."""
    return np.maximum(x, 0.0) if isinstance(x, np.ndarray) else x.clamp_min(0.0)


def stack(rows: Sequence[Logits]) -> Logits:
    if isinstance(rows[0], np.ndarray):
        return np.stack(rows)
    import torch

    return torch.stack(list(rows))


def only(logits: Logits, allowed: Sequence[int]) -> Logits:
    """A 1-D row with every id but `allowed` at -inf."""
    if isinstance(logits, np.ndarray):
        masked = np.full_like(logits, -np.inf)
        masked[list(allowed)] = logits[list(allowed)]
        return masked
    import torch

    kept = torch.tensor(list(allowed), device=logits.device)
    masked = torch.full_like(logits, float("-inf"))
    masked[kept] = logits[kept]
    return masked
