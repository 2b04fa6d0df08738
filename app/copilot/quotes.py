"""Quotes in the model's own text: runs of words that a passage holds verbatim.

The drafter's provenance marks what it copied (citations.provenance_segments). The target
writes a source's words itself just as often: always on a path that verifies no drafts
(`llamacpp-f16`), and wherever no draft was proposed. Such a run is as much a quote as a
drafted one, and the provenance view should say where it came from. A run counts from
MIN_QUOTE_WORDS words and MIN_QUOTE_CHARS characters (shorter ones, "the job is", match by
chance) and is matched with runs of whitespace taken as one space, as the passage and the
answer break lines differently, and with its first letter in either case: a quote that opens
the model's sentence is capitalised ("Each component may ..." from "... each component may
..."). It is credited to the passage its sentence cites when that passage holds it, else to the
lowest-numbered passage holding it: srun, sbatch and salloc share whole option descriptions, and
under "[3] Use the `sbatch` command with the `--time-min` option to set a minimum time limit ..."
the provenance named [2], srun, while the sentence cited [3], sbatch, which holds it too (session 34,
in the chat): two sources for one sentence send the operator to two pages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import groupby

from app.copilot.events import Segment
from app.copilot.markers import cited_numbers

MIN_QUOTE_WORDS = 4
MIN_QUOTE_CHARS = 20
# Words that join a sentence rather than carry it. A run counts its words from its first to its last word that is
# none of these: "submit the job to the" and "will be marked "DOWN" if" matched a passage by chance (session 61,
# reported as quotes under another source's marker) and hold three and two such words. Written out here, not taken
# from bm25s's list: importing bm25s (and SciPy) would add ~50 MB to the answering process.
_FUNCTION_WORD_LIST = (
    "a an and are as at be been but by can for from has have if in into is it its may no not of on or so such than "
    "that the their then there these they this to was were when which will with would"
)
FUNCTION_WORDS = frozenset(_FUNCTION_WORD_LIST.split())
_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


def flat(text: str) -> str:
    """`text` with every run of whitespace as one space, as quotes are matched."""
    return " ".join(text.split())


def holds(passage: str, run: str) -> bool:
    """Whether `passage` has `run` verbatim (both whitespace-normalised), its first letter in either case."""
    return run in passage or (run[:1].swapcase() + run[1:]) in passage


def with_quotes(drafted: Sequence[Segment], passage_texts: Mapping[int, str]) -> list[Segment]:
    """The answer split by provenance: the quotes found in its whole text, and the drafter's copies elsewhere.

    Quotes are looked for across the drafter's copies, not only between them: a drafted piece inside a quote the
    model wrote around it had cut it into runs too short to count (fresh18 on `int4`, whose drafter copies
    into most answers: two sentences quoting a source whole were no quote to the checks). A quote's run keeps
    the passage its sentence cites (`mark_quotes`); the drafter's copies keep theirs outside any quote."""
    answer = "".join(segment.text for segment in drafted)
    quoted = mark_quotes([Segment(answer)], passage_texts)
    owner: list[int | None] = []
    for segment in drafted:
        owner += [segment.passage] * len(segment.text)
    at = 0
    for segment in quoted:
        if segment.passage is not None:
            owner[at : at + len(segment.text)] = [segment.passage] * len(segment.text)
        at += len(segment.text)
    out: list[Segment] = []
    at = 0
    for passage, run in groupby(owner):
        length = sum(1 for _ in run)
        out.append(Segment(answer[at : at + length], passage))
        at += length
    return out


def mark_quotes(segments: Sequence[Segment], passage_texts: Mapping[int, str]) -> list[Segment]:
    """`segments` with every quote inside the model's own segments split out and given its passage."""
    flattened = {number: flat(text) for number, text in sorted(passage_texts.items())}
    out: list[Segment] = []
    for segment in segments:
        out.extend([segment] if segment.passage is not None else _split_quotes(segment.text, flattened))
    return [s for s in out if s.text]


def _split_quotes(text: str, passages: Mapping[int, str]) -> list[Segment]:
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    pieces, done, i = [], 0, 0  # done: where the text not yet emitted starts
    while i < len(words):
        end, holders = i, []  # the longest run words[i:end] that a passage holds, and the passages holding it
        while end < len(words):
            run = flat(text[words[i][0] : words[end][1]])
            found = [n for n, passage in passages.items() if holds(passage, run)]
            if not found:
                break
            end, holders = end + 1, found
        start, stop = words[i][0], words[end - 1][1] if end > i else 0
        cited = set(_sentence_markers(text, start, stop)) if len(holders) > 1 else set()
        holder = next((n for n in holders if n in cited), holders[0] if holders else None)
        if holder is not None and end < len(words):  # it may end inside the next word ("explanation." / "as")
            for cut in range(words[end][0] + 1, words[end][1]):
                if not holds(passages[holder], flat(text[start:cut])):
                    break
                if not text[cut].isalnum():  # whole words only: "explanation", never "expl"
                    stop = cut
        if holder is not None and stop - start >= MIN_QUOTE_CHARS and _carried(text, words[i:end]) >= MIN_QUOTE_WORDS:
            pieces += [Segment(text[done:start]), Segment(text[start:stop], holder)]
            done, i = stop, end + (stop > words[end - 1][1])  # a word the quote ends inside is not a new start
        else:
            i += 1
    pieces.append(Segment(text[done:]))
    return pieces


def _carried(text: str, words: Sequence[tuple[int, int]]) -> int:
    """How many of a run's words lie from its first to its last word that is no FUNCTION_WORDS one."""
    carrying = [i for i, (start, stop) in enumerate(words) if _bare(text[start:stop]) not in FUNCTION_WORDS]
    return carrying[-1] - carrying[0] + 1 if carrying else 0


def _bare(word: str) -> str:
    return word.strip(".,;:!?()[]\"'`“”‘’").lower()


def _sentence_markers(text: str, start: int, stop: int) -> list[int]:
    """The [n] markers of the sentence, or sentences, that text[start:stop] stands in."""
    return cited_numbers(sentence_around(text, start, stop))


def sentence_around(text: str, start: int, stop: int) -> str:
    """The sentence, or sentences, of `text` that text[start:stop] stands in (a line break ends one too)."""
    after = _SENTENCE_END.search(text, stop)
    return text[last_sentence_end(text, start) : after.start() if after else len(text)]


def last_sentence_end(text: str, stop: int) -> int:
    """Where the last sentence or line of `text[:stop]` that has ended ends, with its break (0 when none has)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, stop)]
    return ends[-1] if ends else 0
