"""Pinning glibc's mmap threshold: freed multi-MB blocks go back to the system."""

import subprocess
import sys

from core.memory import pin_mmap_threshold

PROBE = """
import sys, torch, psutil
from core.memory import pin_mmap_threshold
if sys.argv[1] == "pin":
    assert pin_mmap_threshold()
process = psutil.Process()
x = torch.ones(4 << 20); del x  # one 16 MB block freed: unpinned glibc raises its threshold to 16 MB
before = process.memory_info().rss
blocks, kept = [], []
for _ in range(40):
    blocks.append(torch.ones(256 << 10))  # 1 MB, like an activation or a KV block
    kept.append(torch.ones(4 << 10))  # 16 KB that stays: the heap cannot shrink past it
del blocks
print((process.memory_info().rss - before) >> 20)
"""


def retained_mb(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_freed_megabyte_blocks_are_returned_once_the_threshold_is_pinned():
    assert retained_mb("free") >= 30  # glibc's adjusted threshold kept them on the heap
    assert retained_mb("pin") <= 4


def test_pinning_is_done_once():
    assert pin_mmap_threshold() is pin_mmap_threshold()
