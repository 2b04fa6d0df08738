"""A tool's own command copied without the tool: `hold <job_list>` from scontrol's COMMANDS section.

The man page of an interactive tool (scontrol, sacctmgr, sreport) lists the commands it takes
under a COMMANDS section, one entry per command and without the tool's name: `hold <job_list>`
is typed as `scontrol hold <job_list>`, or at scontrol's own prompt. The 1.5B model copies such
an entry as if it were a shell command (`hold <job_list>` in the chat, `topology` and
`pidinfo <proc_id>` in 2 of the 61 eval answers; session 23). The grounding check rightly finds
the line verbatim, and an operator who types it gets "command not found". So a found command or
code line whose first word is listed as an entry only by one tool's COMMANDS sections, among
the passages that hold it, is marked with that tool (`GroundingItem.tool`), unless it starts with
the tool's name or the answer writes it after the tool elsewhere ("Use the `reconfigure`
command: `scontrol reconfigure`"). The front ends say to type it after the tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from app.copilot.events import GroundingItem, Passage

COMMAND_SECTIONS = ("COMMANDS", "INTERACTIVE COMMANDS")  # man-page section names, upper case as man pages write them
_TOOL_NAME = re.compile(r"[a-z][a-z0-9_-]*")  # a man page's title is its command's name
COMMAND_WORD = r"[a-z][a-z_]*"  # a tool's command as its man page lists it: `update`, `cancel_reboot`
_ENTRY_START = r"^(?:[-*•]\s+)?"  # where a COMMANDS entry begins: "- hold <job_list>", or "hold <job_list>"
_ENTRY = re.compile(rf"{_ENTRY_START}({COMMAND_WORD})(?=\s|$)", re.M)  # any entry's command word


def tool_of(passage: Passage) -> str:
    """The tool whose commands `passage` lists, '' when it is not a man page's COMMANDS section."""
    title = (passage.title or "").strip()
    return title if passage.heading.strip() in COMMAND_SECTIONS and _TOOL_NAME.fullmatch(title) else ""


def tool_commands(chunks: Iterable[Any]) -> dict[str, frozenset[str]]:
    """The commands each tool of an index takes, for the tools whose man page has a COMMANDS section: the
    entries of its page's lists (`- update <SPECIFICATION>`), and every word the index writes straight after the
    tool's name (`sreport job sizesbyaccount`). `chunks`: the index's, with title, heading and text. The grounding
    check and the decoding filter hold a command line of such a tool to these (grounding.py's `unknown_command`)."""
    chunks = list(chunks)
    listed: dict[str, set[str]] = {}
    for chunk in chunks:
        tool = (chunk.title or "").strip()
        if chunk.heading.strip() in COMMAND_SECTIONS and _TOOL_NAME.fullmatch(tool):
            listed.setdefault(tool, set())
    if not listed:
        return {}
    for chunk in chunks:  # any list entry of its page: `- reservation Utilization` is a report of sreport's
        if (chunk.title or "").strip() in listed:
            listed[chunk.title.strip()].update(_ENTRY.findall(chunk.text))
    after = re.compile(rf"(?<![\w.-])({'|'.join(map(re.escape, listed))}) ({COMMAND_WORD})\b")
    for chunk in chunks:
        for tool, word in after.findall(chunk.text):
            listed[tool].add(word)
    return {tool: frozenset(words) for tool, words in listed.items() if words}


def with_tools(grounding: Sequence[GroundingItem], passages: Sequence[Passage], answer: str) -> list[GroundingItem]:
    """`grounding` with each command a tool takes, copied without that tool, marked with the tool's name."""
    by_number = {passage.number: passage for passage in passages}
    words = " ".join(answer.replace("`", " ").split())
    marked = [_with_tool(item, by_number, words) for item in grounding]
    # `suspend` beside `suspend <job_list>`: one note, on the longer line, says it for both
    longer = [item.text for item in marked if item.tool]
    return [
        replace(item, tool="") if item.tool and any(text.startswith(item.text + " ") for text in longer) else item
        for item in marked
    ]


def _with_tool(item: GroundingItem, by_number: dict[int, Passage], answer_words: str) -> GroundingItem:
    if not (item.found and item.kind in ("code", "command") and item.holders and item.text.split()):
        return item
    first = item.text.split()[0]
    entry = re.compile(rf"{_ENTRY_START}{re.escape(first)}(?=\s|$)", re.M)  # the entry of this command
    listing = [by_number[n] for n in item.holders if n in by_number and entry.search(by_number[n].text)]
    tools = {tool_of(passage) for passage in listing}
    if len(tools) != 1 or "" in tools:
        return item
    tool = tools.pop()
    if first == tool or f"{tool} {first}" in answer_words:
        return item
    return replace(item, tool=tool)
