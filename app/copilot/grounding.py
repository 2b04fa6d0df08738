"""Grounding check: is each command, option, path and code span of an answer in the sources?

An operator may run what the answer shows, so every such item is listed and marked found
or not found *verbatim* in the passages the model was given (whitespace-normalised,
case-sensitive: `--Nodes` is not `--nodes`). Items:
- code: each line of a fenced block and each inline `code` span (a leading `$ ` dropped);
- command: a line outside code that reads like a shell command (`$ cmd ...`, or a
  lowercase word followed by an option, with no sentence punctuation at the end);
- option: every `--long-option` (with its `=value`, if any) anywhere in the answer;
- path: every absolute or home path (`/etc/slurm/slurm.conf`, `~/.ssh/config`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.copilot.events import GroundingItem

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*(?:=[^\s`'\",;)]+)?")
_PATH = re.compile(r"(?<![\w./~-])(?:~|\.{1,2})?(?:/[\w.@%+-]+){2,}/?")
_COMMAND = re.compile(r"^(?:\$\s+)?(?:sudo\s+)?[a-z][\w.-]*(?:\s+\S+)*?\s+--?[A-Za-z]")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def check_grounding(answer: str, passages: Sequence[str]) -> list[GroundingItem]:
    """Every checkable item of `answer`, in order of appearance, each once."""
    haystack = normalise("\n".join(passages))
    seen: dict[str, GroundingItem] = {}
    for kind, text in extract_items(answer):
        text = normalise(text)
        if text and text not in seen:
            seen[text] = GroundingItem(text, kind, text in haystack)
    return list(seen.values())


def extract_items(answer: str) -> Iterable[tuple[str, str]]:
    prose = answer
    for block in _FENCE.finditer(answer):
        for line in block.group(1).splitlines():
            if line.strip():
                yield "code", _drop_prompt(line)
        prose = prose.replace(block.group(0), "\n")
    for span in _INLINE.finditer(prose):
        yield "code", _drop_prompt(span.group(1))
    for line in _INLINE.sub(" ", prose).splitlines():
        line = line.strip().lstrip("-*• ").strip()
        if _looks_like_command(line):
            yield "command", _drop_prompt(line)
    for match in _OPTION.finditer(answer):
        yield "option", match.group(0)
    for match in _PATH.finditer(answer):
        yield "path", match.group(0).rstrip(".")


def _looks_like_command(line: str) -> bool:
    return bool(line) and len(line.split()) <= 16 and line[-1] not in ".:;?!" and bool(_COMMAND.match(line))


def _drop_prompt(line: str) -> str:
    line = line.strip()
    return line[2:] if line.startswith("$ ") else line
