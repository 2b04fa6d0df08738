"""Neighbouring chunks of one section that both rank among a question's passages join into one passage.

A section is cut into chunks with an overlap (chunking.ChunkParams), or at a line or paragraph break
that the splitter drops. When two neighbours both rank among the k passages, the prompt holds their
shared text twice and an entry cut in two (scontrol's `reboot` syntax in one chunk, what `ASAP` and
`nextstate` do in the next) as two passages, often far apart. Joined, they are one passage in the
better-ranked one's place, and the place the other held goes to the next chunk.

A joined chunk's id is its members' ids joined by JOIN: saved eval rows name the
chunks their passages were built from, and `joined_text` rebuilds the passage from the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from retrieval.chunking import Chunk, Position

JOIN = "+"
# Characters between two chunks that the splitter dropped as the break between them: "\n" or "\n\n". A
# longer gap holds text no chunk kept (a dropped paragraph), so those neighbours are not joined.
MAX_GAP = 2
# Up to this many characters between neighbours were whitespace on every corpus measured (runbooks, Slurm,
# HAProxy, Apache: 587 gaps of 3-8 characters, session 46), e.g. a list item's indentation before its code
# fence; text the ingest leaves out (short title lines) leaves gaps of 9 or more. Completing a cut command
# (cut_code.py) joins across such a gap.
WHITESPACE_GAP = 8
T = TypeVar("T")


def join_neighbours(ranked: Iterable[T], chunk_of: Callable[[T], Chunk], window: int) -> list[tuple[list[T], Chunk]]:
    """The groups of `ranked` items, best first, each with its joined chunk: among the first `window`
    items, one whose chunk overlaps or touches a group's text in the same section joins that group (and
    groups that then touch become one, in the better one's place); later items stand alone. The window
    does not depend on how many passages are asked for, so the first k groups are the same for every k."""
    items = list(ranked)
    groups: list[tuple[list[T], Chunk]] = []
    for item in items[:window]:
        groups.append(([item], chunk_of(item)))
        _absorb(groups, len(groups) - 1)
    return groups + [([item], chunk_of(item)) for item in items[window:]]


def _absorb(groups: list[tuple[list[T], Chunk]], home: int) -> None:
    """Make one group of groups[home] and every other group its text reaches, in the best one's place."""
    while True:
        spans = ((j, joined(groups[home][1], span)) for j, (_, span) in enumerate(groups) if j != home)
        j, grown = next(((j, grown) for j, grown in spans if grown is not None), (None, None))
        if j is None or grown is None:
            return
        first, second = sorted((home, j))
        groups[first] = ([*groups[first][0], *groups[second][0]], grown)
        del groups[second]
        home = first


def section_key(chunk: Chunk) -> tuple[str, str, str, int | None]:
    """What places a chunk in one section: only chunks with the same key are neighbours."""
    return chunk.source, chunk.title, chunk.heading, chunk.position.page


def member_ids(chunk_id: str) -> set[str]:
    """The ids of the index chunks a passage's id names (one, or several joined by JOIN)."""
    return set(chunk_id.split(JOIN))


def joined(a: Chunk, b: Chunk, max_gap: int = MAX_GAP) -> Chunk | None:
    """One chunk of the text of `a` and `b` when they are neighbours in one section, else None; a gap of up
    to `max_gap` characters between them is taken for the break the splitter dropped (at most two newlines
    are put back)."""
    if section_key(a) != section_key(b):
        return None
    first, second = sorted((a, b), key=lambda c: (c.position.start, c.position.end))
    start, end = first.position.start, first.position.end
    gap = second.position.start - end
    if gap > max_gap:
        return None
    if gap > 0:
        text = first.text + "\n" * min(gap, MAX_GAP) + second.text
    elif second.position.end <= end:  # inside `first`
        inner = second.position.start - start
        if first.text[inner : inner + len(second.text)] != second.text:
            return None
        text = first.text
    else:
        overlap = -gap
        if first.text[len(first.text) - overlap :] != second.text[:overlap]:
            return None  # offsets that do not locate the texts: better two passages than a garbled one
        text = first.text + second.text[overlap:]
    ids = sorted(member_ids(first.chunk_id) | member_ids(second.chunk_id))
    position = Position(start, max(end, second.position.end), first.position.page)
    return replace(first, chunk_id=JOIN.join(ids), text=text, position=position)


def joined_text(chunk_id: str, chunks: Mapping[str, Chunk]) -> str | None:
    """The text of the passage `chunk_id` names (a chunk's own id, or a joined one), None when the index
    no longer holds one of its chunks or they no longer join."""
    members = [chunks.get(part) for part in chunk_id.split(JOIN)]
    if any(member is None for member in members):
        return None
    span = _join_all([m for m in members if m is not None])
    return span.text if span is not None else None


def _join_all(chunks: Sequence[Chunk]) -> Chunk | None:
    ordered = sorted(chunks, key=lambda c: (c.position.start, c.position.end))
    span: Chunk | None = ordered[0]
    for chunk in ordered[1:]:
        span = joined(span, chunk, WHITESPACE_GAP) if span is not None else None
    return span
