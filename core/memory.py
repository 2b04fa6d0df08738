"""Keep a long-running process's memory flat between answers (glibc malloc tuning).

glibc serves allocations above its mmap threshold with mmap and returns them on free, but
it raises that threshold to the size of each mmapped block freed (up to 32 MB). After the
first prefill, a model's activations and KV blocks of a few MB therefore come from the heap,
where they fragment: the chat process grew from 2.72 to 3.16 GB over 12 answers on the
runbooks. With the threshold pinned at 128 KiB (which also stops the adjustment), it stayed
at 2.70-2.76 GB. Other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024


@functools.cache
def pin_mmap_threshold() -> bool:
    """Pin glibc's mmap threshold once per process; False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        gnu = libc.gnu_get_libc_version  # only glibc has it
    except (OSError, AttributeError):
        return False
    del gnu
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
