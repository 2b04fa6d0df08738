"""A sentence spliced from two items of one source: one item's subject, another's verdict.

Runbooks state thresholds and actions as list items ("One node failing the probe: P3. Drain
the node ..."; "More than 5 % of worker nodes failing: a site-wide problem ... P2, page the
On-call Site Administrator."). Asked about one node, the small model wrote "One node failing
the probe makes it a site-wide problem, usually the squids or upstream. P2, page the On-call
Site Administrator." (session 27, a follow-up on the runbooks). Both halves are verbatim and
the [n] is right, so no other check speaks; the sentence says the opposite of its source.

So a sentence is reported when two quotes of it (quotes.py: longest runs a passage holds, 4
words and 20 characters at least), joined by at most MAX_JOIN_WORDS words of the model's own,
come from one passage but from two of its items, no item holding both, unless those words only
coordinate them ("and", "or", "then", or a bare comma: two statements, each its own item's; counting a
bare comma as a splice instead changed no report on the 168 saved answers of session 27's five sets,
session 29). An item is a list item,
a table row or a paragraph; a definition entry's short term line goes with its description.
Words left out inside one paragraph ("The reason ... is printed within parenthesis") are a
summary, not a splice, and pass.

A table's cells are too short for such quotes. Asked "who approves a full site downtime and how much
notice do users need?", the model answered "Site Manager, within 1 hour [5]." (session 58, in the chat on
the runbooks): "Site Manager" decides in the row "Planned, over 24 h or whole site", "within 1 hour" is
the row "Unplanned outage"'s (the right notice is five working days). So a sentence is reported too when
it holds words found in only one row of a table, the cell fragments (a cell cut at its commas) of two
words or more or with a digit, from two different rows, and names neither row's label (its first cell):
a sentence naming them compares the rows, as an answer may.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from app.copilot.code_spans import prose
from app.copilot.events import Passage, Segment, Splice
from app.copilot.markers import MARKER_GROUP
from app.copilot.quotes import flat, holds, mark_quotes
from app.copilot.tables import plain, tables_in

MAX_JOIN_WORDS = 3
# a join of these only lists two statements, each true in its own item ("... and ..."), no splice
_COORDINATING = {"and", "or", "then", "also", "plus", "but"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")  # within a line: lines are split first
_BLOCK_END = re.compile(r"\n[ \t]*\n")
_ITEM_START = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)]|\|)[ \t]", re.M)
_TERM_END = re.compile(r"[.:;!?]$")
_FRAGMENT_CUT = re.compile(r"[,;]\s+")


def spliced_sentences(answer: str, passages: Sequence[Passage]) -> list[Splice]:
    """Each sentence of the answer's prose that joins quotes of two different items of one passage."""
    texts = {p.number: p.text for p in passages}
    items = {number: items_of(text) for number, text in texts.items()}
    tables = {number: [_unique_fragments(rows) for rows in tables_of(text)] for number, text in texts.items()}
    found: list[Splice] = []
    for line in MARKER_GROUP.sub(" ", prose(answer)).split("\n"):
        for sentence in _SENTENCE_END.split(line):
            segments = mark_quotes([Segment(sentence)], texts)
            quoted = set()  # the passages a splice of quotes was found in: their rows' is the same splice
            for first, second in _joined_quotes(segments):
                source = _spliced_in(first.text, second.text, items)
                if source is not None:
                    found.append(Splice(flat(first.text), flat(second.text), source))
                    quoted.add(source)
            found += [
                spliced
                for number, fragments in tables.items()
                for table in fragments
                if number not in quoted and (spliced := _rows_joined(sentence, table, number))
            ]
    return found


def tables_of(text: str) -> list[list[list[str]]]:
    """Each markdown table of `text` with two data rows or more, as its data rows' cells (emphasis off)."""
    return [[[plain(cell) for cell in row] for row in table.rows] for table in tables_in(text) if len(table.rows) >= 2]


_Fragments = tuple[dict[str, tuple[int, str]], list[str]]


def _unique_fragments(rows: list[list[str]]) -> _Fragments:
    """({fragment in lower case: (its row, as written)} for the fragments of the rows' cells, the label aside,
    whose words only one row holds; the labels). A fragment is a cell cut at its commas and semicolons, of two words
    or more or with a digit."""
    owners: dict[str, set[int]] = {}
    written: dict[str, str] = {}
    for index, row in enumerate(rows):
        for cell in row[1:]:
            for fragment in _FRAGMENT_CUT.split(cell):
                fragment = fragment.strip(" .")
                key = fragment.lower()
                if len(key) >= 5 and (len(key.split()) >= 2 or any(c.isdigit() for c in key)):
                    owners.setdefault(key, set()).add(index)
                    written.setdefault(key, fragment)
    lines = [" | ".join(row).lower() for row in rows]  # "Shift Operator" is a fragment of one row, words of three
    unique = {
        key: (next(iter(held)), written[key])
        for key, held in owners.items()
        if len(held) == 1 and sum(_names(line, key) for line in lines) == 1
    }
    return unique, [row[0] for row in rows]


def _rows_joined(sentence: str, table: _Fragments, number: int) -> Splice | None:
    """The splice of two rows' fragments in `sentence`, when it names neither row's label, else None."""
    unique, labels = table
    said = sentence.lower()
    by_row: dict[int, str] = {}
    for key, (row, _) in unique.items():
        if row not in by_row and _names(said, key):
            by_row[row] = key
    if len(by_row) < 2:
        return None
    (row_a, first), (row_b, second) = sorted(by_row.items(), key=lambda pair: said.find(pair[1]))[:2]
    if any(labels[row] and _names(said, labels[row].lower()) for row in (row_a, row_b)):
        return None
    return Splice(unique[first][1], unique[second][1], number, (labels[row_a], labels[row_b]))


def _names(said: str, words: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(words)}(?!\w)", said) is not None


def items_of(text: str) -> list[str]:
    """A passage's items, whitespace-normalised: list items and table rows, else paragraphs."""
    items: list[str] = []
    for block in _BLOCK_END.split(text):
        cuts = sorted({0, *(m.start() for m in _ITEM_START.finditer(block)), len(block)})
        pieces = [flat(block[a:b]) for a, b in pairwise(cuts) if block[a:b].strip()]
        merged: list[str] = []
        for piece in pieces:  # a definition entry's term ("- FAILING") goes with its description
            if merged and _is_term(merged[-1]):
                merged[-1] += " " + piece
            else:
                merged.append(piece)
        items += merged
    return items


def _is_term(item: str) -> bool:
    words = item.lstrip("-*+| ").split()
    return item[:1] in "-*+" and 0 < len(words) <= 4 and not _TERM_END.search(item)


def _joined_quotes(segments: Sequence[Segment]) -> list[tuple[Segment, Segment]]:
    """(quote, next quote) for each two quotes at most MAX_JOIN_WORDS words of the model's own apart."""
    pairs = []
    for i, first in enumerate(segments):
        if first.passage is None:
            continue
        j, join = i + 1, ""
        if j < len(segments) and segments[j].passage is None:
            j, join = j + 1, segments[j].text
        words = [word.strip(",;").lower() for word in join.split()]
        listed = bool(words) and set(words) - {""} <= _COORDINATING
        if j < len(segments) and segments[j].passage is not None and len(words) <= MAX_JOIN_WORDS and not listed:
            pairs.append((first, segments[j]))
    return pairs


def _spliced_in(first: str, second: str, items: dict[int, list[str]]) -> int | None:
    """The passage holding both quotes in two different items when no item anywhere holds both, else None."""
    a, b = flat(first), flat(second)
    if any(holds(item, a) and holds(item, b) for passage in items.values() for item in passage):
        return None
    for number, passage in items.items():
        if any(holds(item, a) for item in passage) and any(holds(item, b) for item in passage):
            return number
    return None
