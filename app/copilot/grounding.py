"""Grounding check: is each command, option, path, code span and specific of an answer in the sources?

An operator may run what the answer shows, so every such item is listed and marked found
or not found *verbatim* in the passages the model was given (whitespace-normalised,
case-sensitive: `--Nodes` is not `--nodes`). A code or command line also counts as found when
every one of its words is a word of one single passage: `sbatch --array=0-15%4 -N1 tmp` is
built from a source's `$ sbatch --array=0-31 -N1 tmp` and its `"--array=0-15%4"`, and was
flagged to operators although it is right. Options are still checked verbatim on their own.
Items:
- code: each line of a fenced block and each inline `code` span (a leading `$ ` dropped);
- command: a line outside code that reads like a shell command (`$ cmd ...`, or a
  lowercase word followed by an option, with no sentence punctuation at the end);
- option: every `--long-option` (with its `=value`, if any) anywhere in the answer;
- path: every absolute or home path (`/etc/slurm/slurm.conf`, `~/.ssh/config`).

An operator may also act on a specific the model made up (call a pager number, mail an
address, wait 30 minutes), so these are checked too, in prose and code alike (specifics.py
says how each kind is matched): email, url, host, phone, quantity (a number with a time,
size, percent, rate or temperature unit) and name (a capitalised multi-word name with a
word no passage uses).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.copilot.code_spans import FENCE, INLINE, WORD_EDGES, options, without_fences
from app.copilot.events import GroundingItem
from app.copilot.nearest import nearest_in_sources
from app.copilot.specifics import check_specifics

_PATH = re.compile(r"(?<![\w./~-])(?:~|\.{1,2})?(?:/[\w.@%+-]+){2,}/?")
_COMMAND = re.compile(r"^(?:\$\s+)?(?:sudo\s+)?[a-z][\w.-]*(?:\s+\S+)*?\s+--?[A-Za-z]")
_SPACE = re.compile(r"\s+")
_CONTINUED = re.compile(r"\\[ \t]*\n")  # a shell line continuation: the command goes on on the next line


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _joined(text: str) -> str:
    """`text` with continued shell lines joined, as a command copied onto one line reads."""
    return _CONTINUED.sub(" ", text)


def check_grounding(
    answer: str, passages: Sequence[str], question: str = "", numbers: Sequence[int] | None = None
) -> list[GroundingItem]:
    """Every checkable item of `answer`: commands, options, paths and code in order of appearance, then specifics.

    The question counts as a source for specifics only (a user's own "2 hours" is not invented).
    A command, code line or option not found carries the closest one a passage has (nearest.py);
    `numbers` are the passages' source numbers (default 1, 2, ...).
    """
    numbers = list(numbers) if numbers is not None else list(range(1, len(passages) + 1))
    joined = [_joined(p) for p in passages]
    haystack = normalise("\n".join(joined))
    vocabularies = [_words(p) for p in joined]
    seen: dict[str, GroundingItem] = {}
    for kind, text in extract_items(answer):
        text = normalise(text)
        if text and text not in seen:
            found = text in haystack or (kind in ("code", "command") and _built_from_one(text, vocabularies))
            nearest = None if found else nearest_in_sources(text, kind, joined, numbers)
            seen[text] = GroundingItem(text, kind, found, *(nearest or ("", None)))
    return list(seen.values()) + [item for item in check_specifics(answer, passages, question) if item.text not in seen]


def extract_items(answer: str) -> Iterable[tuple[str, str]]:
    for block in FENCE.finditer(answer):
        for line in block.group(1).splitlines():
            if line.strip().strip("`"):  # a closing fence cut short by the length limit is no code
                yield "code", _drop_prompt(line)
    prose = without_fences(answer)
    for span in INLINE.finditer(prose):
        yield "code", _drop_prompt(span.group(1))
    for line in INLINE.sub(" ", prose).splitlines():
        line = line.strip().lstrip("-*• ").strip()
        if _looks_like_command(line):
            yield "command", _drop_prompt(line)
    for option in options(answer):
        yield "option", option
    for match in _PATH.finditer(answer):
        yield "path", match.group(0).rstrip(".")


def _words(text: str) -> set[str]:
    return {word.strip(WORD_EDGES) for word in text.split()} - {""}


def _built_from_one(line: str, vocabularies: Sequence[set[str]]) -> bool:
    """Is every word of a (multi-word) code line a word of one and the same passage?"""
    words = _words(line)
    return len(words) >= 2 and any(words <= vocabulary for vocabulary in vocabularies)


def _looks_like_command(line: str) -> bool:
    return bool(line) and len(line.split()) <= 16 and line[-1] not in ".:;?!" and bool(_COMMAND.match(line))


def _drop_prompt(line: str) -> str:
    """A code line as a command: without a leading `$ ` prompt or a trailing `\\` continuation."""
    line = line.strip()
    line = line[2:] if line.startswith("$ ") else line
    return line[:-1].rstrip() if line.endswith("\\") else line
