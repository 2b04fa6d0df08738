"""Handing the heap's free memory back after an answer (glibc malloc_trim)."""

import subprocess
import sys

from core.memory import release_free_memory

PROBE = """
import sys, torch, psutil
from core.memory import release_free_memory
process = psutil.Process()
x = torch.ones(4 << 20); del x  # one 16 MB block freed: glibc raises its mmap threshold to 16 MB
before = process.memory_info().rss
blocks, kept = [], []
for _ in range(40):
    blocks.append(torch.ones(256 << 10))  # 1 MB, like an activation or a KV block: now on the heap
    kept.append(torch.ones(4 << 10))  # 16 KB that stays: the heap cannot shrink past it
del blocks
if sys.argv[1] == "release":
    assert release_free_memory()
print((process.memory_info().rss - before) >> 20)
"""


def retained_mb(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_freed_megabyte_blocks_stay_in_the_heap_until_released():
    assert retained_mb("keep") >= 30
    assert retained_mb("release") <= 4


def test_release_is_safe_to_call_any_time():
    assert release_free_memory() in (True, False)
