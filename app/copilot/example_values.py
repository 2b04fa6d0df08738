"""A source's example values kept in a command where the operator named their own.

Documentation examples carry their own job ids, node names and times (`scontrol show job 477`,
`NodeName=linux0`, `starttime=2009-02-06T16:00:00`). A command copied with them is grounded, since a
source writes it so, yet it acts on the example's job, node or hour. Seen in the chat: asked about
job 4711, a follow-up answered `scontrol show job 477`, the quick-start guide's example job.

A found command, code line or option keeps an example value when, for one shape of value (a time,
a date, a host name with a number, also as a full name's first label, a number of three or more digits):
- the question (or an earlier question of the conversation) names values of that shape,
- the item uses none of them,
- and the item has a value of that shape that a passage writes and the question does not.
The front ends then name both values, so the operator puts their own in before running it. An
item the question names no such value for is left alone: the model cannot know better there.
"""

from __future__ import annotations

import re

_TIME = re.compile(r"\d{1,2}:\d\d(?::\d\d)?")  # a time of day, seconds optional
# Each shape finds values in a command and in a question alike; the order matters: a time's or a
# date's digits are not read again as a number (10:00 is no number 10, 2009-02-06 no number 2009).
_SHAPES = {
    "date": re.compile(r"(?<![\w-])\d{4}-\d\d-\d\d(?![\d-])"),
    "time": re.compile(rf"(?<![\d:]){_TIME.pattern}(?![\d:])"),  # also after a date's T
    # a host name with a number, alone or as the first label of a full name (`ce01` of `ce01.northgrid.example.org`,
    # at least two labels after it: `job1.sh` is a file)
    "host": re.compile(
        r"(?<![\w.-])[a-z][a-z_-]*\d+(?:\[[\d,-]+\])?(?![\w.])|(?<![\w.-])[a-z][a-z_-]*\[[\d,-]+\]"
        r"|(?<![\w.-])[a-z][a-z_-]*\d+(?=(?:\.[a-z][\w-]*){2,}(?![\w.-]))"
    ),
    "number": re.compile(r"(?<![\w.:-])\d{3,}(?![\w.:]|-\d)"),
}


def values_by_shape(text: str) -> dict[str, list[str]]:
    """{shape: values of that shape in `text`, in order}, each span read as one shape only."""
    found: dict[str, list[str]] = {}
    for shape, pattern in _SHAPES.items():
        for match in pattern.finditer(text):
            found.setdefault(shape, []).append(match.group())
        text = pattern.sub(lambda m: " " * len(m.group()), text)  # keep offsets; hide it from later shapes
    return found


def example_values(item: str, sources: str, asked: str) -> tuple[tuple[str, str], ...]:
    """(a source's example value, the question's own values) for each value of `item` that a passage
    (`sources`) writes and the question (`asked`) does not, where the question names values of that
    shape and the item uses none of them. `item` and `sources` are normalised as the grounding check
    reads them."""
    theirs = values_by_shape(item)
    yours = values_by_shape(asked)
    kept: list[tuple[str, str]] = []
    for shape, values in theirs.items():
        own = list(dict.fromkeys(yours.get(shape, ())))
        if not own or any(same_value(value, mine) for value in values for mine in own):
            continue
        kept += [(value, ", ".join(own)) for value in dict.fromkeys(values) if writes(sources, value)]
    return tuple(kept)


def same_value(a: str, b: str) -> bool:
    """Whether two values are one: as written, or as one time of day (`18:00:00` is the question's `18:00`, and
    `9:30` its `09:30`). Asked to end a reservation at 18:00, `EndTime=2009-02-06T18:00:00` was said to keep an
    example's time in place of 18:00 (session 59's own-values probe)."""
    return a == b or (_TIME.fullmatch(a) is not None and _TIME.fullmatch(b) is not None and _clock(a) == _clock(b))


def _clock(time: str) -> tuple[int, int, int]:
    hours, minutes, *seconds = (int(part) for part in time.split(":"))
    return hours, minutes, seconds[0] if seconds else 0


def writes(sources: str, value: str) -> bool:
    """Does a passage write `value` as a whole (477 is not in 14770; 12:30 is in T12:30)?"""
    before = r"(?<![\d.])" if value[0].isdigit() else r"(?<![\w.])"
    return re.search(rf"{before}{re.escape(value)}(?!\w)", sources) is not None
