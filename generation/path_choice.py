"""The numeric path `auto` chose on this machine before, read back without importing torch.

`auto` measures which path runs the packaged target fastest (numeric_path.py): torch kernels
against llama.cpp's, once per machine. Reading those measurements back takes torch (their key
holds its thread count), and torch's libraries are ~220 MB of resident memory that a process
running only llama.cpp never uses. So the decision itself is also kept, under a key made
without torch: the CPU, the CPUs this process may use, the thread settings torch and OpenMP
read from the environment, the torch and llama.cpp releases installed, and the target (a .gguf file given by
its path also by its size and modification time). When
that key matches, `specrag ask` on llama.cpp loads no torch at all; otherwise the full
resolution runs (and records its answer for the next process).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import os
from functools import cache
from pathlib import Path

from core.hardware import cpu_name
from generation.calibration import read_table, recalled, remember
from generation.model_store import model_identity

KIND = "auto-path3"  # decisions of an older rule are made again (numeric_path.ANSWER_PATH)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # what torch's default thread count follows


@cache  # a property of the machine: load_models asks twice (the remembered path, then the explicit one)
def cuda_driver_present() -> bool:
    """Could CUDA be available here? Without NVIDIA's driver library no torch build can use a GPU."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def cpu_only(device: str) -> bool:
    """Does the device option mean the CPU? ("auto" does where no GPU can be used.)"""
    return device == "cpu" or (device == "auto" and not cuda_driver_present())


def light_key(target: str) -> str:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parts = [cpu_name(), str(usable), *(os.environ.get(name, "") for name in THREAD_VARIABLES)]
    for package in ("torch", "llama_cpp_python"):
        try:
            parts.append(importlib.metadata.version(package))
        except importlib.metadata.PackageNotFoundError:
            parts.append("-")
    parts.append(model_identity(target))
    return f"{KIND}:" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def remembered_auto_path(cache_file: Path | None, target: str, device: str, dtype: str) -> str | None:
    """The path `auto` resolved to for this target on this machine, if it was recorded and still applies
    (a CPU-only machine, default dtype); None means: resolve it with torch. A choice made from measurements
    other work disturbed applies only while the machine is still busy (calibration.measured_once)."""
    if not cpu_only(device) or dtype != "auto":
        return None
    found = recalled(read_table(cache_file), light_key(target))
    return found[0] if found is not None else None


def remember_auto_path(cache_file: Path | None, target: str, path: str, kept: bool = True) -> None:
    """Record what `auto` resolved to (numeric_path.resolve_path calls this after measuring); `kept=False`:
    from measurements taken under load, so only until a quiet start resolves it again."""
    remember(cache_file, light_key(target), path, kept)
