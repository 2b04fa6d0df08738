"""A command the length limit cut off mid-line.

An answer that copies a long runbook section runs into the answer length limit (256 tokens in the chat).
Asked about exit code 137, the answer ended inside the runbook's last code block, on
`condor_history -name ce01.northgrid.example.org <cluster.proc> \\` / `-af ExitCode Exit`: a command cut
in the middle of a word, found in the sources (every word of it is there, in order), and one an operator
could copy (session 59, in the chat). Cut after `rm -rf /var` instead of `/var/cache/squid/*` it would
wipe the machine.

So when the length limit stopped an answer on a line of code (inside a code block, an inline span left
open, or a command line such as `$ mpicc`), and not at its end (no line break after it, or a `\\`
continuation), that command is unfinished. Every front end says so, with the line a passage writes whole
where one starts with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.copilot.code_spans import FENCE_LINE
from app.copilot.events import CutCode, Passage
from app.copilot.grounding import drop_prompt, looks_like_command

_SPACE = re.compile(r"\s+")


def cut_code(answer: str, finish: str, passages: Sequence[Passage], shown: str | None = None) -> CutCode | None:
    """The command the answer was writing when the length limit (`finish` "length") cut it, with where a passage
    writes it whole; None when it ended otherwise, or when what the user is `shown` of it no longer ends with it
    (repeats.py drops an unfinished restart of an earlier line)."""
    if finish != "length" or not answer.strip():
        return None
    if shown is not None and not shown.rstrip().endswith(answer.rstrip().rsplit("\n", 1)[-1].strip()):
        return None
    lines = answer.split("\n")
    in_block = len(FENCE_LINE.findall(answer)) % 2 == 1
    last = lines[-1]
    open_span = last.count("`") % 2 == 1
    prompted = last.lstrip().startswith("$ ")  # a shell prompt: a command line whatever it looks like
    if not (in_block or open_span or prompted or looks_like_command(drop_prompt(last))):
        return None
    if answer.endswith("\n") and not lines[-2].rstrip().endswith("\\"):
        return None  # the line ended; the next one had not begun
    start = len(lines) - 1
    while start > 0 and lines[start - 1].rstrip().endswith("\\"):  # the lines it continues
        start -= 1
    command = " ".join(drop_prompt(line) for line in lines[start:])
    written = _SPACE.sub(" ", command.rsplit("`", 1)[-1] if open_span else command).strip()
    if not written:
        return None
    starts = re.compile(rf"(?<![\w./-]){re.escape(written)}")  # where a word starts, not inside `xmpicc`
    for passage in passages:
        for line in _logical_lines(passage.text):
            if (at := starts.search(line)) is not None:  # whole to the end of its code span or line
                whole = line[at.start() :].split("`", 1)[0].rstrip()
                if len(whole) > len(written):
                    return CutCode(written, passage.number, whole)
    return CutCode(written)


def _logical_lines(text: str) -> list[str]:
    """A passage's lines as commands, a `\\` continuation joined to its next line, spaces collapsed and any
    `$ ` prompt dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [_SPACE.sub(" ", drop_prompt(line)).strip() for line in joined.split("\n")]
