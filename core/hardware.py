"""What the CPU can do natively, for dtype choices that differ by machine."""

from __future__ import annotations

import platform
from pathlib import Path


def native_bf16() -> bool:
    """True when this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX); elsewhere it is emulated and slower."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # private but present since torch 2.3
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def cpu_name() -> str:
    """The CPU's model name (for calibration keys and benchmark records)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
