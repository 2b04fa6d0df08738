"""For a command or option the sources do not have: the closest one they do have, and where.

A flag alone tells an operator what not to run; the nearest real line tells them what to
look at instead (`--array-task-throttle=4` is not in the sources, `--array=0-15%4` is, in
source [1]). Candidates are read from the passage text as the model saw it:
- for a code or command line, every run of as many words in a passage that starts with
  the line's first word (`scontrol update NodeName=adev13 State=RESUME` for
  `scontrol update NodeName=adev13 State=IDLE`), or, when no passage has that word, with
  one spelt nearly the same (`sshare -l` for `ssha -l`);
- for an option (or an inline code span that is one), every `--option` of a passage whose name is
  nearly the option's (`--array` for `--arrays`) or shares a word with it (`--account` for
  `--default-account`, `--array` for `--array-task-throttle`). Compared whole, `--update` was
  "nearest" `--nodes` and `--path` `--switches` (two dashes and a letter or two in common; seen in the
  chat and in the saved answers): a pointer to an unrelated option sends the operator the wrong way.
The closest candidate by difflib's similarity ratio is kept when the ratio reaches
MIN_RATIO. It is a pointer for a person to read, never a correction of the answer.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from app.copilot.code_spans import WORD_EDGES, options

MIN_RATIO = 0.5
# A command name a letter or two off one of the passages' (`ssha` for `sshare`: 0.8; `ssacctmgr` for
# `sacctmgr`: 0.94). Shorter names are left alone: a letter off `ls` or `ps` is another command.
MIN_NAME_RATIO = 0.8
MIN_NAME_LENGTH = 4
MIN_OPTION_NAME_RATIO = 0.6  # `arrays` / `array` 0.91, `cpus-per-tsk` / `cpus-per-task` 0.96; `update` / `nodes` 0.36
_OPTION_NAME = re.compile(r"-+([A-Za-z0-9][\w-]*)")


def nearest_in_sources(text: str, kind: str, passages: Sequence[str], numbers: Sequence[int]) -> tuple[str, int] | None:
    """(closest line or option of a passage, that passage's number) for an item not found; None if none is close.

    A command line is compared with the passages' lines that start with its command; only when none does,
    with those whose command is spelt nearly the same (MIN_NAME_RATIO): `ssha -l` and `ssacctmgr add user`
    are `sshare -l` and `sacctmgr add user` misspelt, and the pointer is what an operator needs then."""
    for misspelt in (False, True):
        best: tuple[float, str, int] | None = None
        for passage, number in zip(passages, numbers, strict=True):
            for candidate in _candidates(text, kind, passage, misspelt):
                if candidate == text:
                    continue
                ratio = difflib.SequenceMatcher(None, text, candidate, autojunk=False).ratio()
                if ratio >= MIN_RATIO and (best is None or ratio > best[0]):
                    best = (ratio, candidate, number)
        if best:
            return best[1], best[2]
    return None


def _related_options(option: str, other: str) -> bool:
    """Whether two options are one spelt otherwise or of one family: names (no dashes, no value) nearly the
    same, or sharing a word of three letters or more (`default-account` and `account`)."""
    names = [_OPTION_NAME.match(item) for item in (option, other)]
    if not all(names):
        return False
    mine, theirs = (name.group(1).lower() for name in names if name)
    if difflib.SequenceMatcher(None, mine, theirs, autojunk=False).ratio() >= MIN_OPTION_NAME_RATIO:
        return True
    return bool({w for w in mine.split("-") if len(w) >= 3} & {w for w in theirs.split("-") if len(w) >= 3})


def _near_name(word: str, name: str) -> bool:
    """A command name misspelt: a letter or two off a word of 4 or more letters."""
    if word == name or min(len(word), len(name)) < MIN_NAME_LENGTH:
        return False
    return difflib.SequenceMatcher(None, word, name, autojunk=False).ratio() >= MIN_NAME_RATIO


def _candidates(text: str, kind: str, passage: str, misspelt: bool = False) -> list[str]:
    """The passage's options, or its runs of words read as commands, that may be `text`'s nearest; with
    `misspelt`, only command runs whose command is spelt nearly as `text`'s is (`_near_name`)."""
    if kind == "option" or (kind == "code" and text.startswith("--") and " " not in text):  # `--opt` inline
        return [] if misspelt else [option for option in options(passage) if _related_options(text, option)]
    if kind not in ("code", "command"):
        return []
    words = text.split()
    if not words:
        return []
    first, size = words[0], len(words)
    passage_words = passage.split()
    return [
        _window(passage_words[i : i + size])
        for i, word in enumerate(passage_words)
        if (_near_name(word.strip(WORD_EDGES), first) if misspelt else word.strip(WORD_EDGES) == first)
        and "›" not in passage_words[i : i + size]  # not a title line
    ]


def _window(words: list[str]) -> str:
    """Words of a passage read as one command: cut after a word that ends a sentence or closes a quote
    opened before the command (a quote opened inside it, as in `hosts.pl 4,1`, is part of it)."""
    kept: list[str] = []
    for word in words:
        kept.append(word.lstrip(WORD_EDGES) if not kept else word)
        ends = word[-1:]
        if ends in ".;,)" or (ends in "`'\"" and _quotes(" ".join(kept), ends) % 2):
            break
    text, before = " ".join(kept), ""
    while text != before:  # peel punctuation, and quotes or parentheses the window cut in half
        before = text = text.strip(".,;:")
        for quote in "`'\"":
            if _quotes(text, quote) % 2:
                text = text.strip(quote)
        if text.count("(") != text.count(")"):
            text = text.strip("()")
    return text


def _quotes(text: str, quote: str) -> int:
    """How many quote marks `text` has; a run of backticks is one (rst's ``literal``)."""
    return len(re.findall(r"`+", text)) if quote == "`" else text.count(quote)
