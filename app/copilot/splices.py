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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from app.copilot.code_spans import prose
from app.copilot.events import Passage, Segment, Splice
from app.copilot.markers import MARKER_GROUP
from app.copilot.quotes import flat, holds, mark_quotes

MAX_JOIN_WORDS = 3
# a join of these only lists two statements, each true in its own item ("... and ..."), no splice
_COORDINATING = {"and", "or", "then", "also", "plus", "but"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")  # within a line: lines are split first
_BLOCK_END = re.compile(r"\n[ \t]*\n")
_ITEM_START = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)]|\|)[ \t]", re.M)
_TERM_END = re.compile(r"[.:;!?]$")


def spliced_sentences(answer: str, passages: Sequence[Passage]) -> list[Splice]:
    """Each sentence of the answer's prose that joins quotes of two different items of one passage."""
    texts = {p.number: p.text for p in passages}
    items = {number: items_of(text) for number, text in texts.items()}
    found: list[Splice] = []
    for line in MARKER_GROUP.sub(" ", prose(answer)).split("\n"):
        for sentence in _SENTENCE_END.split(line):
            segments = mark_quotes([Segment(sentence)], texts)
            for first, second in _joined_quotes(segments):
                source = _spliced_in(first.text, second.text, items)
                if source is not None:
                    found.append(Splice(flat(first.text), flat(second.text), source))
    return found


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
