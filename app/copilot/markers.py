"""The citation marker syntax the prompt asks for: [3], or a group such as [1, 2] or [1; 4].

A group glued to the word before it is part of that word, not a citation: `node[00,03,25]` is a
Slurm hostlist (an answer quoting the log line "error: Nodes node[00,03,25] not responding" cited no
source [0] or [25]), `array[2]` an index. Over 419 saved answers of sessions 44-50, every one of 884
markers stood after a space, a bracket or line start, and the only glued groups were that hostlist.
"""

from __future__ import annotations

import re

MARKER_GROUP = re.compile(r"(?<!\w)\[(\d+(?:\s*[,;]\s*\d+)*)\]")


def cited_numbers(text: str) -> list[int]:
    """The numbers of the [n] markers in `text`, in order of first use; [1, 2] and [1][2] both count."""
    numbers: list[int] = []
    for group in MARKER_GROUP.finditer(text):
        for part in re.split(r"[,;]", group.group(1)):
            n = int(part)
            if n not in numbers:
                numbers.append(n)
    return numbers
