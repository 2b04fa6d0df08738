"""Where a value the question gives falls among the sources' thresholds.

Runbooks state their alarm levels as tables and lists ("| **Less than 30 days** | WARNING | Open a
helpdesk ticket ... |", "| Cache disk `/var/cache/squid` | 85 % | 95 % |", "- **CRITICAL at 95 %**
used: act now."), and operators ask with a value in hand: "about 20 days left on the cert, do I have
to do something tonight?". The 1.5B model reads such tables poorly. Asked about a certificate with
3 days left, it said to tell the Grid Middleware Expert (the 30-day row) where the runbook's row for
under 7 days says to page the On-call Site Administrator (session 33, in the chat); on `rb-04` (20
days) it walked through unrelated passages. Comparing a number with a bound needs no model: each
quantity of the question (specifics.py reads "20 days", "87%", "0.5 %" with their units) is
compared with the bounds of the same unit in the passages, and the row or item it falls in is
shown under the answer, in the source's own words, for the operator to read against the answer.

A bound is a quantity with its comparison: "less than", "<", "more than", ">", "above", "at
least", "at" ("WARNING at 85 %"), or none in a table column headed by an alarm level (WARNING,
CRITICAL: the level is reached at that value). Where a value meets several bounds of one table or
list, the closest bound is the band it is in (3 days is under 30 days and under 7 days: the 7-day
row). A table with a level per column and a metric per row is read only on the rows whose label
shares a word with the question (cache disk, packet loss), as its other rows measure other things;
any other row or item needs a word in common with the question in itself, its table's header or
its passage's title and heading (units aside: "days" is no evidence). Without that, "ATLASDATADISK
just hit 87%" fell in an alert table's "More than 5 % of worker nodes failing the probe" (`rb-06`).
Words are compared by their first four letters ("cert" is "certificate", "expires" "expiry").
Operators type temperatures as "31C", "31 C", "31 deg" or "31 degrees"; the question's are read as the
runbooks write them ("31 °C"): asked "the hall B inlet temperature is 31C, what do I do?" (session 58,
in the chat), nothing was shown, the "27 °C" WARNING row included.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from app.copilot.events import Definition, Passage
from app.copilot.prompting import passage_label
from app.copilot.specifics import quantities, quantity_key
from app.copilot.tables import is_row, plain, table_at

MAX_SHOWN = 3
_LEVEL = re.compile(r"\b(?:OK|WARNING|WARN|CRITICAL|CRIT|OUTAGE|MINOR|MAJOR|P[1-4])\b")
# words saying one quantity is above or below another: a source's bound here, an answer's comparison in comparisons.py
ABOVE_WORDS = r"more than|greater than|higher than|over|above|exceed(?:s|ing)?|beyond"
BELOW_WORDS = r"less than|fewer than|lower than|under|below"
_COMPARISON = [  # the words right before the quantity; the first that ends there counts
    (re.compile(r"(?:<=|≤|(?<!\w)(?:at most|no more than|up to|within))\s*$", re.I), operator.le),
    (re.compile(r"(?:>=|≥|(?<!\w)(?:at least|no less than|from|at))\s*$", re.I), operator.ge),
    (re.compile(rf"(?:<|(?<!\w)(?:{BELOW_WORDS}))\s*$", re.I), operator.lt),
    (re.compile(rf"(?:>|(?<!\w)(?:{ABOVE_WORDS}))\s*$", re.I), operator.gt),
]
# a temperature as typed: "31C", "31 C", "31 degC", "31 deg", "31 degrees", "31 degrees F" (a bare degree is Celsius)
_DEGREES = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:°\s*)?(?:deg(?:rees?)?\b\s*)?([CF])?\b(?![\w%/])", re.I)
_WORD = re.compile(r"[a-z][a-z0-9]{3,}")  # words of four letters or more, compared by their first four
_LEVEL_RIGHT_BEFORE = re.compile(_LEVEL.pattern + r"\s*[(:]?\s*$")
_LIST_ITEM = re.compile(r"[-*+]\s|\d+[.)]\s")
_STOP = {  # question and table words that say nothing of what is measured
    "what", "when", "with", "that", "this", "does", "have", "should", "about", "just", "still", "from", "used",
    "more", "less", "than", "over", "under", "above", "below", "least", "most", "then", "there", "some",
}  # fmt: skip


@dataclass(frozen=True)
class _Bound:
    compare: Callable[[float, float], bool]
    limit: float
    dimension: str

    def meets(self, amount: float) -> bool:
        return self.compare(amount, self.limit)


@dataclass(frozen=True)
class _Band:
    """One row or item: its bound and how the front ends quote it."""

    bound: _Bound
    words: str  # the row or item as the source writes it (markup stripped)
    group: int  # its table or list: two bands of one group with the bound a value falls in leave it undecided
    shared: int = 0  # a level table's row: how many words its label shares with the question


def thresholds(question: str, passages: Sequence[Passage]) -> list[Definition]:
    """For each quantity of the question, the row or item of a passage whose bound it falls in (at most
    one per passage and quantity, MAX_SHOWN in all), as Definitions with `value` set."""
    values = [(text, quantity_key(text)) for _, text in quantities(with_degrees(question))]
    if not values:
        return []
    asked = _stems(question)
    found: list[tuple[int, int, Definition]] = []  # (value's index, words shared with the question, the row)
    for passage in passages:
        bands = _best_rows(list(_bands(passage.text, asked, _stems(f"{passage.title} {passage.heading}"))))
        for index, (text, (amount, dimension)) in enumerate(values):
            met = [band for band in bands if band.bound.dimension == dimension and band.bound.meets(amount)]
            if not met:
                continue
            best = min(met, key=lambda band: abs(band.bound.limit - amount))
            if any(b.group == best.group and b.bound.limit == best.bound.limit and b != best for b in met):
                continue  # two rows with the same bound: which one is meant is not the table's to say
            row = Definition(text, "", passage.number, passage_label(passage), best.words, value=text)
            found.append((index, len(asked & _stems(best.words)), row))
    # of the rows a value falls in, those sharing the most words with the question: "throughput to one peer is at 40%
    # of its baseline" is the throughput row's, not the packet-loss row's that shares "peer" (session 58's probe)
    most = {index: max(shared for i, shared, _ in found if i == index) for index, _, _ in found}
    return [row for index, shared, row in found if shared == most[index]][:MAX_SHOWN]


def _best_rows(bands: list[_Band]) -> list[_Band]:
    """Of a level table, only the rows sharing the most words with the question ("squid cache disk": the
    cache disk's row, not the cache hit ratio's)."""
    most: dict[int, int] = {}
    for band in bands:
        most[band.group] = max(most.get(band.group, 0), band.shared)
    return [band for band in bands if band.shared == most[band.group]]


def _bands(text: str, asked: set[str], context: set[str]) -> Iterator[_Band]:
    """The bounded rows and items of `text` that share a word with the question (`asked`): a row of a table
    with a level per column by its label, any other by its own words, its table's header or `context`."""
    group, lines, at = 0, _items_joined(text), 0
    while at < len(lines):
        stripped = lines[at].strip()
        if is_row(stripped):  # a table is a group; a list right after it is a group of its own
            table, at = table_at(lines, at)
            group += 1
            for row in table.rows:
                yield from _row_bands(list(row), list(table.header or ()), asked, context, group)
            group += 1
            continue
        at += 1
        if _LIST_ITEM.match(stripped):
            item = plain(re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", stripped))
            bound = _bound_in(item, level=False)
            if bound is not None and asked & (context | _stems(item)):
                yield _Band(bound, item, group)
        elif stripped:
            group += 1  # prose between lists: the next list is another one


def _items_joined(text: str) -> list[str]:
    """`text`'s lines, each list item's indented continuation lines joined to it: "- **Space token at CRITICAL
    (95 %)**: open a helpdesk ticket for the Storage Expert, who may move" goes on "unused space between tokens"."""
    lines: list[str] = []
    for line in text.split("\n"):
        continues = bool(lines) and bool(_LIST_ITEM.match(lines[-1].strip())) and line[:1] in (" ", "\t")
        if continues and line.strip() and not _LIST_ITEM.match(line.strip()):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def _row_bands(cells: list[str], header: list[str], asked: set[str], context: set[str], group: int) -> Iterator[_Band]:
    levels = [bool(_LEVEL.search(cell)) for cell in header]
    if any(levels[1:]):  # a metric per row, a level per column: only rows about what the question asks
        shared = len(asked & _stems(cells[0]))
        if not shared:
            return
        for index, cell in enumerate(cells[1:], 1):
            if index < len(levels) and levels[index] and (bound := _bound_in(plain(cell), level=True)):
                yield _Band(bound, f"{plain(cells[0])}: {plain(header[index])} {plain(cell)}", group, shared)
        return
    if not asked & (context | _stems(" ".join([*header, *cells]))):
        return
    for cell in cells:
        if (bound := _bound_in(plain(cell), level=False)) is not None:
            yield _Band(bound, " · ".join(plain(c) for c in cells if c), group)
            return


def _bound_in(text: str, level: bool) -> _Bound | None:
    """The first quantity of `text` with its comparison; a bare one counts as reached in a level column, or right
    after a level ("Space token at WARNING (85 %)": unread until session 58, when the chat showed nothing under
    "ATLASDATADISK is at 96% full"). A level further before it is not enough: "WARNING: fetch-crl has not completed
    ... for 24 hours" then banded a certificate's "5 days left" (`rf-02`), another clock altogether."""
    for start, quantity in quantities(text):
        before = text[:start]
        limit, dimension = quantity_key(quantity)
        for pattern, compare in _COMPARISON:
            if pattern.search(before):
                return _Bound(compare, limit, dimension)
        if (level and not before.strip(" :")) or _LEVEL_RIGHT_BEFORE.search(before):  # "at WARNING (85 %)"
            return _Bound(operator.ge, limit, dimension)
        return None
    return None


def with_degrees(text: str) -> str:
    """`text` with each temperature as typed ("31C", "31 deg") written as the sources write one ("31 °C")."""
    return _DEGREES.sub(_degrees, text)


def _degrees(match: re.Match[str]) -> str:
    """A temperature as typed, written as the sources write one ("31 °C"); any other number as it was."""
    said, unit = match.group(0), match.group(2)
    if not unit and not re.search(r"deg", said, re.I):
        return said
    return f"{match.group(1)} °{(unit or 'C').upper()}" + (" " if said.endswith(" ") else "")


def _stems(text: str) -> set[str]:
    """Crude stems: the first four letters of each longer word ("cert", "certificate"; "expires", "expiry"),
    quantities and their units left out."""
    for start, quantity in reversed(quantities(text)):
        text = text[:start] + " " + text[start + len(quantity) :]
    return {word[:4] for word in _WORD.findall(text.lower()) if word not in _STOP}
