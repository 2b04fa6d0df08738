"""Weight-only quantized linear layers on torch's CPU kernels, batch invariant by construction.

`Int4Linear` calls `aten._weight_int4pack_mm_for_cpu` (affine int4, groups of 32 along the
input, bf16 activations) and `Int8Linear` calls `aten._weight_int8pack_mm` (per-output-
channel int8, bf16 activations). Both compute each output row on its own: on this machine
(and the Zen 4 box in DESIGN.md) a row of an M-row product was bit-identical to the same row
computed alone for M = 1..16, which stock float32 and bf16 F.linear are not. That is what
lets a speculative verification pass reproduce plain decoding bit for bit.

Inputs and outputs keep the caller's dtype (float32 in the residual stream): only the
matmul input is rounded to bf16, and the bias is added in float32 afterwards.
`Q4KEmbedding` keeps a Q4_K embedding table in its packed bytes and decodes only the rows
looked up, so the vocabulary table costs 0.14 GB instead of 0.93 GB in float32.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from functools import cache

import torch
from torch import nn

from generation.gguf_blocks import GROUP, Q4_K_BYTES, q4k_scales_mins

ACT = torch.bfloat16  # the int4/int8 CPU kernels are fast only with bf16 activations (float32 is 20-60x slower)
# From this many rows on (prefill), dequantizing the weight to bf16 and using the stock bf16 matmul
# beats the kernel. On an AMX Xeon 600 rows x 8960x1536 took 1.09 s in the int4 kernel against 0.22 s
# dequantized; on an AVX512-BF16 EPYC the int4 kernel won up to ~500 rows (400 rows: 33 vs 50 ms).
# So the int4 crossover is measured per machine (numeric_path.cached_wide_plan; set_int4_wide_rows applies it).
# Prefill is shared by plain and speculative decoding, so it need not be row invariant; decoding and
# verification passes (<= 17 rows) always use the invariant kernels.
# The dequantized matmul runs in bf16 where the CPU has bf16 instructions; on AVX2 a bf16 matmul of
# 600 rows x 8960x1536 took 20 s against 0.11 s in float32, so there it runs in float32
# (numeric_path measures which, once per machine, and `set_wide_dtype` applies it).
WIDE_ROWS = 160  # int8: its dequantization is one multiply, cheaper than its kernel from here on both CPUs
WIDE_ROWS_INT4 = 160
WIDE_DTYPE = ACT
MIN_WIDE_ROWS = 64  # never a verification pass
CHUNK_ELEMENTS = 1 << 20  # weights an int4 dequantization step widens at once: 4 MB of float32
INT8_ROWS_PER_STEP = 256  # rows of an int8 weight dequantized per multiply: 256 x 8960 floats stay in cache


class Int4Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool, group: int = GROUP) -> None:
        super().__init__()
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.register_buffer("packed", torch.empty(out_features, in_features // 2, dtype=torch.uint8))
        self.register_buffer("scales_zeros", torch.empty(in_features // group, out_features, 2, dtype=ACT))
        self.register_buffer("bias", torch.empty(out_features) if bias else None)

    @classmethod
    def from_groups(
        cls, codes: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor, bias: torch.Tensor | None
    ) -> Int4Linear:
        """codes [N, K] in 0..15 with weight = code * scale + offset per group of 32 ([N, K/32] each)."""
        layer = cls(codes.shape[1], codes.shape[0], bias is not None)
        layer.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.to(torch.int32).contiguous(), 1)
        # the kernel dequantizes (code - 8) * scale + zero
        zero = offset + 8 * scale
        layer.scales_zeros = torch.stack([scale.t(), zero.t()], dim=-1).to(ACT).contiguous()
        if bias is not None:
            layer.bias = bias.float()
        return layer

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> Int4Linear:
        """Min/max affine quantization per group of 32 (for weights not already in Q4_K)."""
        n, k = weight.shape
        groups = weight.float().reshape(n, k // GROUP, GROUP)
        lo, hi = groups.amin(-1), groups.amax(-1)
        scale = ((hi - lo) / 15).clamp(min=1e-8).to(ACT).float()
        codes = ((groups - lo[..., None]) / scale[..., None]).round().clamp(0, 15).reshape(n, k)
        return cls.from_groups(codes, scale, lo, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        y = self.wide_product(rows)
        if y is None:
            return self.narrow(rows.to(ACT), x.dtype).reshape(*x.shape[:-1], self.out_features)
        return _with_bias(y.to(x.dtype), self.bias).reshape(*x.shape[:-1], self.out_features)

    def narrow(self, rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The kernel's product for `rows` [n, in] already in ACT, as `dtype` plus the bias: what `forward`
        computes for a decoding pass, for callers that convert one input once for several layers."""
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(rows, self.packed, self.group, self.scales_zeros)
        return _with_bias(y.to(dtype), self.bias)

    def takes_wide(self, n_rows: int) -> bool:
        """Does a pass of `n_rows` rows dequantize and multiply (prefill) instead of calling the kernel?"""
        block = int4_block()
        return n_rows >= WIDE_ROWS_INT4 and bool(block) and self.out_features % block == 0

    def wide_product(self, rows: torch.Tensor) -> torch.Tensor | None:
        """rows @ W^T in WIDE_DTYPE, bias left out, for a prefill-sized pass; None where the kernel runs."""
        if not self.takes_wide(rows.shape[0]):
            return None
        return torch.mm(rows.to(WIDE_DTYPE), self.dequantized_t(WIDE_DTYPE, reuse=True))

    def dequantized_t(self, dtype: torch.dtype = ACT, reuse: bool = False) -> torch.Tensor:
        """The weight as `dtype` [in, out]: (code - 8) * scale + zero, the kernel's own formula.

        With `reuse`, the result lives in this thread's workspace (see `workspace`) and is only valid
        until the next reuse: for a product computed at once, as in `forward`.

        A few blocks of output columns at a time (the kernel packs `int4_block()` columns per block, their
        bytes contiguous over the whole input): unpack their codes, widen them to float32 and take one
        addcmul in float32, rounded to `dtype` once on the way out (what a bf16 addcmul computes, bit for
        bit: tests). A group of 32 input rows at a time instead read the packed bytes across every block:
        on a 2-core AMX Xeon, interleaved in one process, 1536x8960 took 15 against 21 ms, 1536x1536 2.5
        against 4.0, 896x4864 4.7 against 9, 8960x1536 15 against 16, and only the draft's 4864x896 more
        (4.7 against 3.7). Before that, the whole matrix was unpacked first and each group's addcmul ran in
        bf16, whose arithmetic is slow on CPU (8960x1536: 15 ms against 10 for groups in float32). A
        prefill dequantizes every weight once."""
        block = int4_block()
        half, blocks = block // 2, self.out_features // block
        packed = self.packed.reshape(blocks, self.in_features, half)  # each block's bytes, contiguous
        groups = self.in_features // self.group
        # scale and zero as [block index, group, column within the block], to broadcast over a group's rows
        by_block = self.scales_zeros.float().reshape(groups, blocks, block, 2).transpose(0, 1)
        scale, zero = by_block[..., 0].contiguous(), by_block[..., 1].contiguous()
        step = max(1, CHUNK_ELEMENTS // (self.in_features * block))  # blocks per chunk
        low = _buffer("low", torch.uint8, (step, self.in_features, half), reuse)
        high = _buffer("high", torch.uint8, (step, self.in_features, half), reuse)
        widened = _buffer("widened", torch.float32, (step, self.in_features, 2, half), reuse)
        exact = _buffer("exact", torch.float32, (step, self.in_features, block), reuse)
        weight = _buffer("weight", dtype, (self.in_features, self.out_features), reuse)
        columns = weight.view(self.in_features, blocks, block)
        for j in range(0, blocks, step):
            n = min(step, blocks - j)
            torch.bitwise_and(packed[j : j + n], 0xF, out=low[:n])  # each block's first half of columns
            torch.bitwise_right_shift(packed[j : j + n], 4, out=high[:n])  # and its second half
            codes = widened[:n]
            codes[:, :, 0].copy_(low[:n])
            codes[:, :, 1].copy_(high[:n])
            codes.sub_(8)
            out = exact[:n].view(n, groups, self.group, block)
            torch.addcmul(zero[j : j + n, :, None], codes.view(out.shape), scale[j : j + n, :, None], out=out)
            columns[:, j : j + n].copy_(exact[:n].transpose(0, 1))
        return weight.reshape(self.in_features, self.out_features)


def _with_bias(y: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return y if bias is None else y + bias


_WORKSPACES = threading.local()


def workspace(name: str, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """This thread's buffer `name` as a tensor of `shape`, reused from call to call.

    A prefill dequantizes each weight once and multiplies at once, so one buffer serves every
    layer. A fresh 55 MB tensor is mapped anew by malloc and page-faulted on first touch: that
    was ~40 of the 64 ms of dequantizing an 8960x1536 weight on a 2-core AVX2 EPYC."""
    numel = math.prod(shape)
    buffers = _WORKSPACES.__dict__
    buffer = buffers.get(name)
    if buffer is None or buffer.dtype != dtype or buffer.numel() < numel:
        with torch.inference_mode(False):  # writable inside and outside inference mode
            buffer = buffers[name] = torch.empty(numel, dtype=dtype)
    return buffer[:numel].view(tuple(shape))


def _buffer(name: str, dtype: torch.dtype, shape: Sequence[int], reuse: bool) -> torch.Tensor:
    """The workspace buffer `name` with `reuse`, else a fresh tensor."""
    return workspace(name, dtype, shape) if reuse else torch.empty(tuple(shape), dtype=dtype)


def set_int4_wide_rows(rows: int) -> None:
    """From how many rows an Int4Linear dequantizes instead of calling the kernel (at least MIN_WIDE_ROWS)."""
    global WIDE_ROWS_INT4
    WIDE_ROWS_INT4 = max(int(rows), MIN_WIDE_ROWS)


def set_wide_dtype(dtype: torch.dtype) -> None:
    """The dtype prefill-sized passes dequantize to and multiply in (bf16 or float32)."""
    global WIDE_DTYPE
    WIDE_DTYPE = dtype


def unpack_int4_centered(
    packed: torch.Tensor, in_features: int, block: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Codes - 8 as int8 [in, out] from `_convert_weight_to_int4pack_for_cpu`'s output. Found by probing
    torch 2.13: blocks of `block` output rows (64 on AVX512 builds, 32 on AVX2); per input column block/2
    bytes, low nibbles the block's first half of rows, high nibbles its second half. `out`: a uint8
    buffer of as many elements to write them into."""
    half = block // 2
    blocks = packed.reshape(-1, in_features, half).transpose(0, 1)  # [in, out/block, block/2]
    shape = (in_features, blocks.shape[1], 2, half)
    codes = torch.empty(shape, dtype=torch.uint8) if out is None else out.view(shape)
    torch.bitwise_and(blocks, 0xF, out=codes[:, :, 0])
    torch.bitwise_right_shift(blocks, 4, out=codes[:, :, 1])
    codes.sub_(8)  # wraps modulo 256, so viewed as int8 it is code - 8
    return codes.view(torch.int8).reshape(in_features, -1)


@cache
def int4_block() -> int | None:
    """Output rows per block of this machine's int4 packing (64 or 32), or None if neither layout inverts it.

    The packing depends on the CPU kernel torch dispatches to, so it is probed once per process;
    with None, prefill-sized passes keep calling the kernel."""
    codes = torch.randint(0, 16, (128, 64), dtype=torch.int32, generator=torch.Generator().manual_seed(0))
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1)
    for block in (64, 32):
        if torch.equal(unpack_int4_centered(packed, 64, block).t().to(torch.int32) + 8, codes):
            return block
    return None


class Int8Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight_int8", torch.empty(out_features, in_features, dtype=torch.int8))
        self.register_buffer("scales", torch.empty(out_features, dtype=ACT))
        self.register_buffer("bias", torch.empty(out_features) if bias else None)

    @classmethod
    def from_float(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> Int8Linear:
        """Symmetric per-output-channel int8; the scale is rounded to bf16 before the codes are chosen."""
        layer = cls(weight.shape[1], weight.shape[0], bias is not None)
        scale = (weight.abs().amax(1) / 127).clamp(min=1e-8).to(ACT)
        layer.scales = scale
        layer.weight_int8 = (weight / scale.float()[:, None]).round().clamp(-128, 127).to(torch.int8)
        if bias is not None:
            layer.bias = bias.float()
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        y = self.wide_product(rows)
        if y is None:
            return self.narrow(rows.to(ACT), x.dtype).reshape(*x.shape[:-1], self.out_features)
        return _with_bias(y.to(x.dtype), self.bias).reshape(*x.shape[:-1], self.out_features)

    def narrow(self, rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """As Int4Linear.narrow, on the int8 kernel."""
        return _with_bias(torch._weight_int8pack_mm(rows, self.weight_int8, self.scales).to(dtype), self.bias)

    def takes_wide(self, n_rows: int) -> bool:
        """Does a pass of `n_rows` rows dequantize and multiply (prefill) instead of calling the kernel?"""
        return n_rows >= WIDE_ROWS

    def wide_product(self, rows: torch.Tensor) -> torch.Tensor | None:
        """rows @ W^T in WIDE_DTYPE, bias left out, for a prefill-sized pass (WIDE_ROWS); None where the kernel runs."""
        if not self.takes_wide(rows.shape[0]):
            return None
        return torch.nn.functional.linear(rows.to(WIDE_DTYPE), self.dequantized(WIDE_DTYPE, reuse=True))

    def dequantized(self, dtype: torch.dtype, reuse: bool = False) -> torch.Tensor:
        """The weight as `dtype` [out, in]: code * scale, one multiply per block of rows (in cache, as
        Int4Linear.dequantized_t); with `reuse`, in this thread's workspace."""
        weight = _buffer("weight", dtype, (self.out_features, self.in_features), reuse)
        scales = self.scales[:, None].to(dtype)
        for start in range(0, self.out_features, INT8_ROWS_PER_STEP):
            rows = slice(start, start + INT8_ROWS_PER_STEP)
            torch.mul(self.weight_int8[rows], scales[rows], out=weight[rows])
        return weight


class Q4KEmbedding(nn.Module):
    """An embedding table kept as Q4_K blocks; lookups decode just the rows asked for (exact values)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.dtype = num_embeddings, embedding_dim, dtype
        row_bytes = embedding_dim // 256 * Q4_K_BYTES
        self.register_buffer("blocks", torch.empty(num_embeddings, row_bytes, dtype=torch.uint8))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.blocks[ids.reshape(-1)].reshape(-1, self.embedding_dim // 256, Q4_K_BYTES)
        d = rows[..., 0:2].contiguous().view(torch.float16).float()
        dmin = rows[..., 2:4].contiguous().view(torch.float16).float()
        sc, m = q4k_scales_mins(rows[..., 4:16])
        qs = rows[..., 16:].to(torch.int32).reshape(rows.shape[0], -1, 4, 1, 32)
        codes = torch.cat([qs & 0xF, qs >> 4], dim=3).reshape(rows.shape[0], -1, 8, 32).float()
        values = codes * (d * sc.float())[..., None] - (dmin * m.float())[..., None]
        return values.reshape(*ids.shape, self.embedding_dim).to(self.dtype)


class HalfEmbedding(nn.Module):
    """An embedding table stored in bf16 (half the float32 bytes), looked up into float32.

    For tables not in Q4_K (e.g. the default draft's Q5_0 one: 0.27 GB instead of 0.55 GB)."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.register_buffer("table", torch.empty(num_embeddings, embedding_dim, dtype=ACT))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[ids].float()
