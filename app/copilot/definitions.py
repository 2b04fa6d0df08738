"""What the sources say each option of the answer does: a real option used for the wrong purpose.

The grounding check finds invented commands. The commonest wrong answer left on questions no
setting was fitted to is another kind: a real option or setting, found verbatim in a source,
used for something it does not do (`--time-min` for a start time, `-M` of scontrol, which
names a cluster, as a node count, `InactiveLimit` for a per-user job limit; session 24). No
check can tell that from the text. An operator can, in a second, when the source's own
definition stands beside the option. So for every option, setting or subcommand of the
answer's code that a passage defines, this gives the first sentence of that definition.

Man pages and configuration references are definition lists, which the HTML reader writes as
an entry line and its description line (`- -M, --clusters=<string>` then `- The cluster to
issue commands to. ...`). An entry's names are the words before `=`, `[` or a space of each
comma-separated form. A token of the answer's code is looked up by those names. A
one-letter option means something else in every tool. It is explained only from a passage of the
command's own tool (the page titled by the line's first word), and not at all without one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.copilot.events import Definition, GroundingItem, Passage

MAX_SHOWN = 6  # options explained per answer; more reads as a second answer
MAX_CHARS = 160  # a definition's first sentence is cut here

_ENTRY = re.compile(r"^- (?P<term>[^\n]{1,80})\n- (?P<text>[^\n]+)", re.M)
_NAME = re.compile(r"^(?:--?[A-Za-z][\w-]*|[A-Za-z][\w.-]*)")  # up to '=', '[', '<', a space or a comma
_TOKEN = re.compile(r"--?[A-Za-z][\w-]*|[A-Za-z][\w.-]*")
_SHORT = re.compile(r"-[A-Za-z]")
_COMMAND = re.compile(r"[a-z][a-z0-9_.-]*")  # a command's name, as a man page's title gives it
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]][.!?])\s+(?=[A-Z(\"'])")
_CODE_KINDS = ("code", "command", "option")


@dataclass(frozen=True)
class _Entry:
    names: frozenset[str]
    term: str
    text: str
    source: int
    title: str
    tool: str  # the passage's page title when it names a command (`scontrol`), else ''


def defined_options(grounding: Sequence[GroundingItem], passages: Sequence[Passage]) -> list[Definition]:
    """The definitions passages give of the options, settings and subcommands in the answer's code.

    In the order the answer uses them, each name once, at most MAX_SHOWN. A name is taken from
    a found item only: an invented one is already flagged, and its lookalike's definition
    would lend it credit."""
    entries = [entry for passage in passages for entry in _entries(passage)]
    if not entries:
        return []
    shown: dict[str, Definition] = {}
    for item in grounding:
        if not (item.found and item.kind in _CODE_KINDS):
            continue
        tool, names = _names_used(item)
        for name in names:
            if name not in shown and (entry := _entry_for(name, tool, entries)) is not None:
                shown[name] = Definition(name, entry.term, entry.source, entry.title, entry.text)
            if len(shown) == MAX_SHOWN:
                return list(shown.values())
    return list(shown.values())


def _entries(passage: Passage) -> Iterable[_Entry]:
    title = (passage.title or "").strip()
    tool = title if _COMMAND.fullmatch(title) else ""
    for match in _ENTRY.finditer(passage.text):
        term = match.group("term").strip()
        names = frozenset(name.group(0) for form in term.split(",") if (name := _NAME.match(form.strip())) is not None)
        if names:
            yield _Entry(names, term, first_sentence(match.group("text")), passage.number, title, tool)


def _names_used(item: GroundingItem) -> tuple[str, list[str]]:
    """The tool a code item runs ('' if none) and its option, setting and word names, in order.

    `scontrol update JobId=<job_id> TimeLimit=+120` runs `scontrol` and uses `update`, `JobId`
    and `TimeLimit`; a value after `=` is the user's, not a name."""
    words = item.text.split()
    tool = item.tool
    if len(words) > 1 and _COMMAND.fullmatch(words[0]):
        tool, words = words[0], words[1:]
    keys = (word.split("=", 1)[0] for word in words)
    return tool, list(dict.fromkeys(key for key in keys if _TOKEN.fullmatch(key)))


def _entry_for(name: str, tool: str, entries: Sequence[_Entry]) -> _Entry | None:
    """The definition of `name`: from the line's own tool's page first; a one-letter option only from there."""
    holding = [entry for entry in entries if name in entry.names]
    own = [entry for entry in holding if tool and entry.tool == tool]
    if own:
        return own[0]
    if _SHORT.fullmatch(name):
        return None
    # a long option or a setting names the same thing across pages (srun's and sbatch's --time-min);
    # the definition shown carries its page's title either way
    return holding[0] if holding else None


def first_sentence(text: str, width: int = MAX_CHARS) -> str:
    """The first sentence of a description, cut to `width` characters."""
    sentence = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= width else sentence[: width - 1].rstrip() + "…"
