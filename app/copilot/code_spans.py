"""Markdown code in an answer: fenced blocks and inline `code` spans, found one way for every check.

grounding.py reads the code verbatim; specifics.py reads only the prose around it, and
withhold.py the prose of an answer still streaming (`prose_so_far`). Patterns kept in one
place keep them from disagreeing about where code starts and ends. The `--option`
pattern and the punctuation around a word are shared the same way by grounding.py (finding
items) and nearest.py (finding the closest ones in the sources).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# group 1: the block's body (an unclosed block runs to the end of the answer)
FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
# a line that opens or closes a code block (`.match` one line, or `.findall` over many: an odd count is inside one)
FENCE_LINE = re.compile(r"^[ \t]*```", re.M)
# CommonMark's code span, kept to one line: a run of n backticks opens it and the next run of exactly n
# closes it, so ``a `b` c`` is one span (reStructuredText's literals, which models copy from rst sources,
# are such double-backtick spans). Group "code": the span's text (inline_code strips its padding).
INLINE = re.compile(r"(?<!`)(?P<ticks>`+)(?!`)(?P<code>.+?)(?<!`)(?P=ticks)(?!`)")
# an option's value may hold commas (`--format=JobID,MaxRSS`), not a trailing one ("--array, then")
OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*(?:=(?:[^\s`'\",;)]|,(?=[^\s`'\",;)]))+)?")
WORD_EDGES = "`'\"()[]{},.;:"  # quotes and punctuation around a word in prose, not part of it


def options(text: str) -> list[str]:
    """Every `--option` of `text`, with its value; a sentence's full stop is not part of the value."""
    return [match.group(0).rstrip(".") for match in OPTION.finditer(text)]


def inline_code(text: str) -> list[str]:
    """The text of each inline code span of `text` (one cut by a soft wrap read whole: `joined_spans`), one
    space of padding on both sides stripped as CommonMark strips it (`` `x` `` is `x`)."""
    return [_unpadded(match.group("code")) for match in INLINE.finditer(joined_spans(text))]


def _unpadded(code: str) -> str:
    return code[1:-1] if len(code) > 2 and code[0] == code[-1] == " " and code.strip() else code


@dataclass(frozen=True)
class Span:
    """An inline code span of one line: where its opening backticks start, its text starts and ends, and
    where its closing backticks end (`end` when it is still open)."""

    opening: int
    start: int
    end: int
    closing: int
    closed: bool


_TICKS = re.compile(r"`+")


def line_spans(line: str, still_open: bool = False) -> list[Span]:
    """The inline code spans of one line, by INLINE's rule. On a line still being written, a run of
    backticks that no later run closes opens a span to the end of the line; backticks ending the line
    that are fewer than its opening run may be its closing run being written, and are not its text.
    An unclosed run of two or more followed by a space is taken for literal backticks ("`` empty"), as
    rst literals, the double spans models copy, start right after their backticks."""
    spans = []
    for run, close in _paired_runs(line):
        ticks = len(run.group())
        if close:
            spans.append(Span(run.start(), run.end(), close.start(), close.end(), True))
        elif still_open and (ticks == 1 or not line[run.end() : run.end() + 1].isspace()):
            trailing = len(line) - len(line.rstrip("`"))
            end = len(line) - trailing if run.end() < len(line) and trailing < ticks else len(line)
            spans.append(Span(run.start(), run.end(), max(end, run.end()), len(line), False))
            break
    return spans


def _paired_runs(line: str) -> Iterator[tuple[re.Match[str], re.Match[str] | None]]:
    """Each run of backticks that opens a span on `line`, with the run of as many that closes it (None: never
    closed, so literal backticks, and the scan goes on after it), by INLINE's rule."""
    pos = 0
    while run := _TICKS.search(line, pos):
        close = next((c for c in _TICKS.finditer(line, run.end()) if len(c.group()) == len(run.group())), None)
        yield run, close
        pos = close.end() if close else run.end()


def without_fences(text: str) -> str:
    """`text` with each fenced block replaced by a line break."""
    return FENCE.sub("\n", text)


# a line that starts a block of its own (blank, fence, heading, quote, list item): no code span goes on into it
_BLOCK_START = re.compile(r"[ \t]*(?:$|```|#|>|[-*+][ \t]|\d+[.)][ \t])")
_FENCE_MARK = re.compile(r"[ \t]*```")


def joined_spans(text: str) -> str:
    """`text` with the line break inside each inline code span that a soft wrap cut made a space, as CommonMark
    reads it (a span goes on to the next run of as many backticks in its paragraph). Every other character
    stays where it was, so offsets into `text` still hold.

    Hard-wrapped Markdown cuts spans: the runbooks' "Check `cvmfs_talk -i atlas.cern.ch" / "host info` to see
    which one it is using." The model copies it so, and read line by line the first line's backtick was
    unpaired: the grounding check took the line for an assembled command, and the provenance view and Slack
    showed the backticks (seen in the chat, session 57). A fenced block's lines are code already: none is joined.
    """
    chars, lines = list(text), text.split("\n")
    fenced = _FENCE_MARK.match(lines[0]) is not None
    paragraph, at = "" if fenced else lines[0], len(lines[0])  # the prose lines joined so far; `at`: the break after
    for line in lines[1:]:
        ticks = _left_open(paragraph)
        if ticks and not _BLOCK_START.match(line) and any(len(run.group()) == ticks for run in _TICKS.finditer(line)):
            chars[at] = " "
            paragraph += " " + line
        else:
            mark = _FENCE_MARK.match(line) is not None
            paragraph = "" if fenced or mark else line
            fenced ^= mark
        at += 1 + len(line)
    return "".join(chars)


def _left_open(line: str) -> int:
    """How many backticks open the first run of `line` that no run of as many closes on it (0: none)."""
    return next((len(run.group()) for run, close in _paired_runs(line) if close is None), 0)


def prose(text: str) -> str:
    """`text` without its code: fenced blocks become line breaks, inline spans a space."""
    return INLINE.sub(" ", joined_spans(without_fences(text)))


# an answer still streaming: a fence mark may be open, its newline or closing mark not yet written
_FENCE_SO_FAR = re.compile(r"```.*?(?:```|\Z)", re.S)


def prose_so_far(text: str, stand_in: str = " ") -> str:
    """Like `prose`, for an answer still being written: a fence from its first backticks, and an inline
    span not yet closed (`line_spans`' rule), count as code up to the end (of the answer, of its line).
    Each piece of code becomes `stand_in`: a word where the sentence must keep a value in its place
    ("is `8MB` [4].")."""
    lines = _FENCE_SO_FAR.sub(stand_in, text).split("\n")
    return "\n".join(_spans_replaced(line, stand_in) for line in lines)


def _spans_replaced(line: str, stand_in: str) -> str:
    out, pos = [], 0
    for span in line_spans(line, still_open=True):
        out += [line[pos : span.opening], stand_in]
        pos = span.closing
    return "".join([*out, line[pos:]])
