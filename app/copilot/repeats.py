"""What an answer shows of what it wrote twice: each sentence once.

The engine's repetition guard stops an answer when a run of tokens comes round for the third
time (finish reason "repeat"). By then the small model has usually written the same sentence
or line two or three times, often under a new [n] each time ("[1] All nodes must share the
munge.key. [2] All nodes must share the munge.key. [3] All nodes..."). The front ends then
show the answer with every sentence or line that repeats an earlier one (ignoring [n]
markers, case and spacing) left out, and without the unfinished restart it was stopped in.
An answer cut by the length limit loses such a restart too ("[2] DRAINING The node is
currently executing a", after the whole sentence under [5]; seen in the chat), and with it the
short lines that led into it when they only echo earlier ones (the heading "[2] DRAINING").
A cut answer's last unit that is only markers ("[6]", the loop stopped before its sentence) goes
the same way: it cites nothing.
Nothing else changes: a sentence that says anything new stays, so does every line of code
that is not a repeat, and the raw answer stays in `Final.answer`. An answer that ended on its
own gets its prose sentences collapsed the same way, and keeps its code as written.

A follow-up can also get an earlier answer back whole. Asked in the chat (runbooks) "And how do I
take it out of the batch system while I fix it?" after a question on a node's CVMFS errors, the
model wrote its first answer (remount CVMFS) again word for word, with the draining runbook among
its passages (session 44). `repeats_earlier_answer` tells such an answer, and the front ends warn
that it may not answer the question asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.copilot.code_spans import FENCE_LINE
from app.copilot.markers import MARKER_GROUP
from app.copilot.unnumbered import unnumbered_citation

MIN_KEY_CHARS = 20  # shorter units ("```", "}", "Example:") may legitimately come twice
MIN_REPEATED_CHARS = 80  # how much of an earlier answer said again tells a repeat; a short sentence may recur
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_LEADING_MARKERS = re.compile(rf"(?:\s*{MARKER_GROUP.pattern})*\s*")
_SPACE = re.compile(r"\s+")


def sentence_key(unit: str) -> str:
    """What tells two sentences or lines the same: their words, [n] markers, case and spacing aside."""
    return _SPACE.sub(" ", MARKER_GROUP.sub(" ", unit)).strip().lower()


def _units(line: str) -> list[str]:
    """A prose line's sentences, each keeping the space after it."""
    pieces, start = [], 0
    for match in _SENTENCE_END.finditer(line):
        pieces.append(line[start : match.end()])
        start = match.end()
    return [*pieces, line[start:]]


def shown_answer(answer: str, finish_reason: str) -> str:
    """What the front ends show of an answer that ended for `finish_reason` (withheld ones aside).

    An answer that ended on its own can repeat a sentence too ("[3] X ... [6] X"), and then
    shows it once; its code is left alone, where a repeated line can be a real step (the same
    command in two examples). One stopped where it cited by the prompt's `[n]` shows what came before it
    (unnumbered.py)."""
    if finish_reason == "unnumbered":
        answer = answer[: unnumbered_citation(answer)]
    return collapse_repeats(answer, code=finish_reason == "repeat", cut=finish_reason in ("repeat", "length"))


def collapse_repeats(text: str, code: bool = True, cut: bool | None = None) -> str:
    """`text` with each sentence or line that repeats an earlier one dropped, and, when it was `cut`
    (default: as `code`), a final unfinished unit dropped when it only restarts an earlier one; a code
    block left with no line goes whole. With `code` False, only prose sentences are dropped.
    When nothing is dropped, `text` comes back as written, spacing and all."""
    cut = code if cut is None else cut
    raw_lines = text.split("\n")
    seen: set[str] = set()
    dropped = restarted = False
    echoes = 0  # kept units on the current line that only repeat an earlier short one

    def keep(unit: str, last: bool) -> bool:
        nonlocal dropped, restarted, echoes
        key = sentence_key(unit)
        bare = bool(unit.strip()) and not key  # only [n] markers: a sentence it never began
        restart = cut and last and (bare or (key and any(earlier.startswith(key) for earlier in seen)))
        if (len(key) >= MIN_KEY_CHARS and key in seen) or restart:
            dropped, restarted = True, restarted or bool(restart)
            return False
        echoes += key in seen
        seen.add(key)
        return True

    out: list[str] = []
    echo_lines: list[bool] = []  # per line of `out`: a prose line made only of echoes
    block: list[str] | None = None  # the open code block: its fence line, then its kept lines
    previous: tuple[list[str], int] = ([], -1)  # the last code block shown: its lines, and where `out` ended it
    for number, line in enumerate(raw_lines):
        last_line = number == len(raw_lines) - 1
        if FENCE_LINE.match(line):
            if block is None:
                block = [line]
            else:
                shown = [*block, line] if len(block) > 1 else []  # a block of repeats only goes whole
                if shown and _again(shown, previous, out):
                    shown = []
                out.extend(shown)
                echo_lines.extend([False] * len(shown))
                dropped, block = dropped or not shown, None
                previous = (shown, len(out)) if shown else previous
            continue
        if block is not None:
            if not code or keep(line, last_line) or not line.strip():
                block.append(line)
            continue
        units, kept, markers, echoes = _units(line), [], "", 0
        for index, unit in enumerate(units):
            if keep(unit, last_line and index == len(units) - 1):
                kept.append(markers + unit)
                markers = ""
            else:  # a dropped sentence's leading [n] goes to the next kept one on its line
                markers += _LEADING_MARKERS.match(unit).group()
        if kept or not line.strip():
            out.append("".join(kept).rstrip())
            echo_lines.append(bool(kept) and echoes == len(kept))
    if block is not None:
        out.extend(block if len(block) > 1 else [])  # still open where the answer stopped
        dropped = dropped or len(block) == 1
    elif restarted:  # the lines that led into the dropped restart, when they only echo earlier ones
        while out and (echo_lines[-1] or not out[-1].strip()):
            out.pop()
            echo_lines.pop()
    if not dropped:
        return text
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def _again(block: list[str], previous: tuple[list[str], int], out: list[str]) -> bool:
    """Is `block` the code block shown just before it once more, with nothing but blank lines between? The
    model sometimes writes a command's block twice in a row (seen in the chat); an answer that ended on its own
    keeps its code as written, but one block twice back to back is no second step."""
    lines, end = previous
    return (
        bool(lines)
        and [sentence_key(line) for line in block] == [sentence_key(line) for line in lines]
        and not any(line.strip() for line in out[end:])
    )


def without_sentences(text: str, sentences: Sequence[str]) -> str:
    """`text` with each of `sentences` (as written in it) taken out, with the spaces after it and any line or
    blank line it leaves empty. With no sentences, `text` comes back as written."""
    if not sentences:
        return text
    for sentence in sentences:
        text = re.sub(re.escape(sentence) + r"[ \t]*", "", text, count=1)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def repeats_earlier_answer(answer: str, earlier: Sequence[str]) -> bool:
    """Does `answer` only say again what one of the `earlier` answers of its conversation said: is every
    sentence or line of it that is long enough to tell (MIN_KEY_CHARS) one of that answer's, with at least
    MIN_REPEATED_CHARS of them? ([n] markers, case and spacing aside; a short or empty answer never does.)"""
    keys = [key for key in (sentence_key(unit) for unit in _all_units(answer)) if len(key) >= MIN_KEY_CHARS]
    if sum(map(len, keys)) < MIN_REPEATED_CHARS:
        return False
    return any(set(keys) <= {sentence_key(unit) for unit in _all_units(before)} for before in earlier)


def _all_units(text: str) -> list[str]:
    return [unit for line in text.split("\n") for unit in _units(line)]
