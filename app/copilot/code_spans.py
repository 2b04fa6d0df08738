"""Markdown code in an answer: fenced blocks and inline `code` spans, found one way for every check.

grounding.py reads the code verbatim; specifics.py reads only the prose around it. One pair
of patterns keeps the two from disagreeing about where code starts and ends.
"""

from __future__ import annotations

import re

# group 1: the block's body (an unclosed block runs to the end of the answer)
FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
INLINE = re.compile(r"`([^`\n]+)`")  # group 1: the span's text


def without_fences(text: str) -> str:
    """`text` with each fenced block replaced by a line break."""
    return FENCE.sub("\n", text)


def prose(text: str) -> str:
    """`text` without its code: fenced blocks become line breaks, inline spans a space."""
    return INLINE.sub(" ", without_fences(text))
