"""A value the answer gives an option that the option's own entry does not list among its values.

Asked how to cancel a user's waiting jobs and leave the running ones alone (fresh14, session 60), the model wrote
`scancel --state=WAITING`. scancel's page lists what `--state` takes: "job_state_name may have a value of either
"PENDING", "RUNNING" or "SUSPENDED"." Every piece of the line was found (`--state` in a passage, `waiting` the
question's own word), so it counted as grounded and stood ready to copy, and scancel rejects it.

A man page lists an option's values in one of two ways:
- a run of three or more capitalised words joined by commas, "or" and "and", each perhaps with an aside in
  brackets, in its description (scancel's `--state`, sbatch's `--mail-type`, sinfo's `--states`), in a
  description that ends as a sentence does (a passage cut in the middle of the list would list too few);
- alternatives in its term (`--open-mode={append|truncate}`, `--x11[={all|first|last}]`).
A word the answer's line gives such an option (`--state=WAITING`, `-t waiting`, each word of
`--mail-type=END,FAILURE`) that the list does not hold, in any case (Slurm reads `pending` as `PENDING`), is
reported with the list. The entry is the line's own tool's: a passage of its page, else its page in the index
(tool_pages.py, source 0). Only found lines are read: an invented one is already flagged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.copilot.definitions import Entry, entries_of
from app.copilot.events import GroundingItem, Passage, UnlistedValue

_CAPITAL = r'"?[A-Z][A-Z0-9_]{2,}"?'  # NONE, "PENDING", TIME_LIMIT_90
# a comma, "or" or "and", after an aside on the value before it: "INVALID_DEPEND (dependency never satisfied) and"
_JOIN = r"(?:\s*\([^()]{0,80}\))?(?:\s*,\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+)"
_LISTED_RUN = re.compile(rf"{_CAPITAL}(?:{_JOIN}{_CAPITAL}){{2,}}")
# a term whose value is one of its alternatives: --open-mode={append|truncate}, --x11[={all|first|last}],
# --kill-on-invalid-dep=<yes|no>, --send-libs[=yes|no]
_TERM_CHOICES = re.compile(r"(?:-\w, )?--[\w-]+(?:=|\[=)[{<]?(?P<choices>\w+(?:\|\w+)+)[}>]?\]?")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+")  # a value that names something, not a number or a path
_TOOL = re.compile(r"[a-z][a-z0-9_.-]*")
_CODE_KINDS = ("code", "command")


def listed_values(entry: Entry) -> tuple[str, ...]:
    """The values an option's entry lists (upper case, in their order), or () when it lists none."""
    choices = _TERM_CHOICES.fullmatch(entry.term)
    if choices:
        return tuple(dict.fromkeys(choice.upper() for choice in choices.group("choices").split("|")))
    if not entry.description.rstrip().endswith((".", ")", '"')):
        return ()  # the passage may cut the list short
    runs = _LISTED_RUN.findall(entry.description)
    return tuple(dict.fromkeys(word.strip('"') for run in runs for word in re.findall(_CAPITAL, run)))


def unlisted_values(
    grounding: Sequence[GroundingItem],
    passages: Sequence[Passage],
    pages: Mapping[str, Mapping[str, Entry]] | None = None,
) -> list[UnlistedValue]:
    """Each word a found command line of the answer gives an option whose entry lists its values, where the list
    does not hold it; `pages` are the tools' own pages in the index ({tool: {option: entry}}: tool_pages.py)."""
    entries = [entry for passage in passages for entry in entries_of(passage)]
    found: dict[tuple[str, str, str], UnlistedValue] = {}
    for item in grounding:
        if not item.found or item.kind not in _CODE_KINDS:
            continue
        words = item.text.split()
        if len(words) < 2 or not _TOOL.fullmatch(words[0]):
            continue
        tool = words[0]
        for option, value in _option_values(words[1:]):
            entry = _entry(tool, option, entries, pages or {})
            listed = listed_values(entry) if entry else ()
            if not entry or not listed or ("=" not in value and not _takes_value(entry)):
                continue
            for word in re.split(r"[,&]", value.split("=", 1)[-1].strip("\"'")):
                if _WORD.fullmatch(word) and word.upper() not in listed:
                    key = (tool, option, word)
                    found.setdefault(key, UnlistedValue(tool, option, word, listed, entry.source, entry.title))
    return list(found.values())


def _option_values(words: Sequence[str]) -> list[tuple[str, str]]:
    """(option, what it is given) for each option of a line's words: `--state=WAITING` ('=WAITING'), `-t idle`
    ('idle': the next word, if it is no option)."""
    given = []
    for i, word in enumerate(words):
        if not re.match(r"--?[A-Za-z]", word):
            continue
        name, equals, value = word.partition("=")
        if equals:
            given.append((name, "=" + value))
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            given.append((name, words[i + 1]))
    return given


def _takes_value(entry: Entry) -> bool:
    """Does the option's term show a value (`-t, --states=<states>`), so that the next word of a line is its?"""
    return any(mark in entry.term for mark in "=<[")


def _entry(tool: str, option: str, entries: Sequence[Entry], pages: Mapping[str, Mapping[str, Entry]]) -> Entry | None:
    """The option's entry on the tool's own page: a passage's first, else the index's (source 0)."""
    own = [entry for entry in entries if entry.tool == tool and option in entry.names and entry.text]
    return own[0] if own else pages.get(tool, {}).get(option)
