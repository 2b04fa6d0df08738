"""Read GGUF weight tensors without dequantizing them to floats first.

Q4_K is the format of most of the default models' linear layers: super-blocks of 256
weights, each 8 sub-blocks of 32 weights w = d * sc * q - dmin * m, with q a 4-bit code,
d and dmin float16 per super-block and sc, m 6-bit per sub-block. `q4k_groups` returns
exactly that: the codes and the per-32-weight (scale, offset), which is the affine int4
group-32 format of torch's CPU int4 kernel, so the packaged weights carry over with only
the scale and offset rounded to that kernel's bf16. Other types (Q6_K, Q8_0, F16, F32)
go through gguf's own dequantizer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

Q4_K_BYTES = 144  # d, dmin (2 x f16), 12 bytes of packed 6-bit scales/mins, 128 bytes of codes
SUPER = 256
GROUP = 32


class GGUFTensors:
    """Name -> tensor view of one GGUF file (memory-mapped; nothing is read until asked)."""

    def __init__(self, path: Path) -> None:
        self.reader = GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def kind(self, name: str) -> GGMLQuantizationType:
        return self.tensors[name].tensor_type

    def shape(self, name: str) -> tuple[int, ...]:
        """Torch order ([out, in] for a matrix); GGUF lists dimensions fastest first."""
        return tuple(int(n) for n in reversed(self.tensors[name].shape))

    def floats(self, name: str) -> torch.Tensor:
        """The tensor dequantized to float32 (exact for F32/F16; the packaged values for the rest)."""
        t = self.tensors[name]
        data = np.asarray(t.data)
        values = data if t.tensor_type == GGMLQuantizationType.F32 else dequantize(data, t.tensor_type)
        return torch.from_numpy(np.array(values, dtype=np.float32)).reshape(self.shape(name))  # a writable copy

    def raw(self, name: str) -> np.ndarray:
        """The raw block bytes, one row per output feature."""
        return np.asarray(self.tensors[name].data)


def q4k_scales_mins(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 12-byte field of each super-block -> (sc, m), each [..., 8] small integers."""
    p = packed.to(torch.int32)
    low_sc, low_m = p[..., 0:4] & 63, p[..., 4:8] & 63
    high_sc = (p[..., 8:12] & 0xF) | ((p[..., 0:4] >> 6) << 4)
    high_m = (p[..., 8:12] >> 4) | ((p[..., 4:8] >> 6) << 4)
    return torch.cat([low_sc, high_sc], -1), torch.cat([low_m, high_m], -1)


def q4k_groups(raw: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_K rows [N, K/256*144] bytes -> codes [N, K] (0..15), scale and offset [N, K/32] float32.

    Weight = code * scale + offset, exactly as llama.cpp dequantizes it (up to float32 rounding).
    """
    rows = raw.shape[0]
    blocks = torch.from_numpy(np.array(raw, copy=True)).reshape(rows, -1, Q4_K_BYTES)
    d = blocks[..., 0:2].contiguous().view(torch.float16).float()  # [N, B, 1]
    dmin = blocks[..., 2:4].contiguous().view(torch.float16).float()
    sc, m = q4k_scales_mins(blocks[..., 4:16])
    qs = blocks[..., 16:].to(torch.int32).reshape(rows, -1, 4, 32)  # 4 chunks of 64 weights
    # chunk c: low nibbles are sub-block 2c, high nibbles sub-block 2c + 1
    codes = torch.stack([qs & 0xF, qs >> 4], dim=3).reshape(rows, -1)
    scale = (d * sc.float()).reshape(rows, -1)
    offset = (-dmin * m.float()).reshape(rows, -1)
    return codes, scale, offset
