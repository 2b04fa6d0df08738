"""A passage cut inside a command or a code block, or right before one, or cut from the term it describes,
is completed from its section.

Chunks are cut at a size, so a long command or code block can end up in two, and the lead-in of a block
("Drain the node first, then:") in another chunk than the block. A passage that ends on
`scontrol create reservation starttime=2009-02-06T16:00:00 \\` shows the model half an example, and it
writes the other half itself (session 46: `MaxStartDelay=4 hours` where the source goes on
`duration=120 user=root flags=maint`); one that ends on "Check the proxies from the node:" shows it the
step without its commands, and it made some up and looped. Such a passage takes in the neighbouring chunk
of its section (neighbours.joined), at most MAX_EXTRA on each side:
- forward, while it ends on a line continued with a backslash, inside a ``` fence, or on a lead-in (a
  last line that ends with a colon);
- backward, while it starts inside a ``` fence;
- backward once, when it goes on with a definition-list entry (a man page's command or option: the
  chunk's `entry`) whose term the chunk just before holds. The term line is the syntax the model should
  copy: asked how to reboot a node once its jobs finish, it got the `reboot` entry from "ASAP)." on,
  without `reboot [ASAP] [nextstate={RESUME|DOWN}] ...` and the sentence saying what it does, and wrote
  `scontrol reboot --reboot` from a slurm.conf passage (session 48). Only the term's own chunk is taken
  in: an entry passage that starts further down would grow by a third again (measured on the Slurm
  questions: 6 passages 3.5% longer with this rule, 23% longer when it reaches back to any term).
Whether a point of a section lies inside a fence is counted from the section's first chunk: headings cut
sections, and a fence does not cross one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from retrieval.chunking import Chunk
from retrieval.neighbours import WHITESPACE_GAP, joined, section_key

MAX_EXTRA = 2  # neighbouring chunks a passage may take in on each side (~200 tokens each)
FENCE = "```"

SectionKey = tuple[str, str, str, int | None]


class Sections:
    """The chunks of an index by section, in document order (built once, on first use)."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self._chunks = chunks
        self._by_section: dict[SectionKey, list[Chunk]] | None = None

    def of(self, chunk: Chunk) -> list[Chunk]:
        if self._by_section is None:
            by_section: dict[SectionKey, list[Chunk]] = defaultdict(list)
            for row in self._chunks:
                by_section[section_key(row)].append(row)
            for rows in by_section.values():
                rows.sort(key=lambda c: (c.position.start, c.position.end))
            self._by_section = dict(by_section)
        return self._by_section.get(section_key(chunk), [])


def completed(span: Chunk, sections: Sections) -> Chunk:
    """`span` joined with the neighbours that finish the command or code block it is cut in (or itself)."""
    section = sections.of(span)
    if len(section) < 2:
        return span
    for _ in range(MAX_EXTRA):
        if not _ends_cut(span, section):
            break
        grown = _join_next(span, section, forward=True)
        if grown is None:
            break
        span = grown
    span = _with_its_term(span, section)
    for _ in range(MAX_EXTRA):
        if not _inside_fence_at(span.position.start, section):
            break
        grown = _join_next(span, section, forward=False)
        if grown is None:
            break
        span = grown
    return span


def _ends_cut(span: Chunk, section: list[Chunk]) -> bool:
    if span.position.end >= section[-1].position.end:
        return False  # the section ends here: nothing to take in
    end = span.text.rstrip()
    return end.endswith(("\\", ":")) or _inside_fence_at(span.position.end, section)


def _with_its_term(span: Chunk, section: list[Chunk]) -> Chunk:
    """`span` joined with the chunk just before it when that one holds the term of the entry `span` goes on
    with."""
    before = _neighbour(span, section, forward=False) if span.entry else None
    if before is None or span.entry not in before.text:
        return span
    return joined(before, span, WHITESPACE_GAP) or span


def _join_next(span: Chunk, section: list[Chunk], forward: bool) -> Chunk | None:
    """`span` joined with its neighbour that way (`_neighbour`), or None."""
    neighbour = _neighbour(span, section, forward)
    return joined(span, neighbour, WHITESPACE_GAP) if neighbour else None


def _neighbour(span: Chunk, section: list[Chunk], forward: bool) -> Chunk | None:
    """The first chunk of `span`'s section that reaches past its end (or before its start)."""
    if forward:
        return next((c for c in section if c.position.end > span.position.end), None)
    return next((c for c in reversed(section) if c.position.start < span.position.start), None)


def _inside_fence_at(offset: int, section: list[Chunk]) -> bool:
    """Whether the section's text before document offset `offset` leaves a ``` fence open."""
    pieces, cursor = [], section[0].position.start
    for chunk in section:
        if chunk.position.start >= offset:
            break
        if chunk.position.start > cursor + WHITESPACE_GAP:
            return False  # text no chunk holds: the count would be a guess
        pieces.append("\n" * (chunk.position.start - cursor) if chunk.position.start > cursor else "")
        begin = max(cursor, chunk.position.start) - chunk.position.start
        end = min(chunk.position.end, offset) - chunk.position.start
        if end > begin:
            pieces.append(chunk.text[begin:end])
            cursor = chunk.position.start + end
    lines = "".join(pieces).split("\n")
    return sum(line.lstrip().startswith(FENCE) for line in lines) % 2 == 1
