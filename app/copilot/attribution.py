"""Does the source a sentence cites hold the command it quotes?

The grounding check asks whether *some* passage has an item. An operator checks an answer by
opening the source its sentence cites, so a command copied from [2] under a sentence that
cites [1] sends them to the wrong page. The 1.5B model does this: "[4] Set the
`MaxJobsPerUser` parameter ..." cited a heterogeneous-jobs page, while the limit is on the
sacctmgr page it had as [3] (session 20, in the chat).

The grounding check records the passages that hold each found item verbatim (`holders`);
this adds the markers of the sentence it stands in (`cited`): a fenced block belongs to the sentence that introduces it,
and a sentence without a marker is not judged, since it may go on from any source. An item
whose sentence cites only passages that do not hold it is misattributed (`Final.misattributed`).
Items built with the user's own values (`adapted`) are held by no passage verbatim and are
not judged.

Prose quotes are judged the same way (`judge_quotes`): a run of words that a passage holds
verbatim (the provenance view's quotes, quotes.py, and the drafter's copies; matched as quotes.py
matches them) under a sentence whose markers name only passages without it. "[2] Set the node
to a DOWN state and then return it to service ..." was the troubleshooting guide's [3], under
the FAQ's [2] (session 21, in the chat). The provenance marks showed [3]; nothing said that the citation was wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from app.copilot.code_spans import FENCE
from app.copilot.events import GroundingItem, Quote, Segment
from app.copilot.grounding import normalise
from app.copilot.markers import cited_numbers
from app.copilot.quotes import MIN_QUOTE_CHARS, MIN_QUOTE_WORDS, holds

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")


def attribute(answer: str, grounding: Sequence[GroundingItem]) -> list[GroundingItem]:
    """`grounding` (whose found items know their `holders`: grounding.py) with `cited` filled in for them: the
    markers of the sentence each answers to, () when that cites none."""
    spans = sentence_spans(answer)
    return [
        replace(item, cited=spans[index][2] if index is not None else ()) if item.holders else item
        for index, item in _placed(answer, spans, grounding)
    ]


def placed_items(answer: str, grounding: Sequence[GroundingItem]) -> list[tuple[int | None, GroundingItem]]:
    """Each item with the index, in `sentence_spans(answer)`, of the prose sentence it answers to: the first
    sentence or line that holds it, or for a fenced block the sentence that introduces it; None for none."""
    return _placed(answer, sentence_spans(answer), grounding)


def _placed(
    answer: str, spans: Sequence[tuple[int, int, tuple[int, ...], bool]], grounding: Sequence[GroundingItem]
) -> list[tuple[int | None, GroundingItem]]:
    units = [normalise(answer[start:end]) for start, end, _, _ in spans]
    placed = []
    for item in grounding:
        index = next((i for i, unit in enumerate(units) if item.text in unit), None)
        while index is not None and spans[index][3]:  # a fenced block answers to the sentence before it
            index = index - 1 if index > 0 else None
        placed.append((index, item))
    return placed


def judge_quotes(segments: Sequence[Segment], passage_texts: Mapping[int, str]) -> list[Quote]:
    """The quotes among `segments` (the answer split by provenance) that stand in a sentence citing a source,
    with the passages that hold them: `misattributed` when none of those is cited. A quote is judged by
    the sentence it starts in; a fenced block is not prose."""
    return [quote for _, quote in placed_quotes(segments, passage_texts)]


def placed_quotes(segments: Sequence[Segment], passage_texts: Mapping[int, str]) -> list[tuple[int, Quote]]:
    """judge_quotes' quotes, each with the index of its sentence in `sentence_spans` of the joined text."""
    flat = {number: normalise(text) for number, text in passage_texts.items()}
    spans = sentence_spans("".join(segment.text for segment in segments))
    out, at = [], 0
    for segment in segments:
        start, at = at, at + len(segment.text)
        start += len(segment.text) - len(segment.text.lstrip())  # a copy may begin with the space after a sentence
        quote = normalise(segment.text)
        if segment.passage is None or len(quote) < MIN_QUOTE_CHARS or len(quote.split()) < MIN_QUOTE_WORDS:
            continue
        index = next(
            (i for i, (begin, end, _, fenced) in enumerate(spans) if begin <= start < end and not fenced), None
        )
        cited = spans[index][2] if index is not None else ()
        holders = tuple(number for number, passage in sorted(flat.items()) if holds(passage, quote))
        if cited and holders:
            out.append((index, Quote(quote, cited, holders)))
    return out


def prose_sentences(text: str) -> list[str]:
    """The sentences and lines of `text` outside code blocks, as written (`sentence_spans`' prose)."""
    return [text[begin:end].strip() for begin, end, _, fenced in sentence_spans(text) if not fenced]


def sentence_spans(text: str) -> list[tuple[int, int, tuple[int, ...], bool]]:
    """(start, end, markers, fenced) for each non-blank sentence or line of prose, and for each fenced block's
    body, which answers to the markers of the sentence before it."""
    spans: list[tuple[int, int, tuple[int, ...], bool]] = []
    prose_start = 0
    for fence in [*FENCE.finditer(text), None]:
        prose_end = fence.start() if fence else len(text)
        begin = prose_start
        for separator in [*_SENTENCE_END.finditer(text, prose_start, prose_end), None]:
            end = separator.start() if separator else prose_end
            if text[begin:end].strip():
                spans.append((begin, end, tuple(cited_numbers(text[begin:end])), False))
            begin = separator.end() if separator else end
        if fence:
            spans.append((fence.start(1), fence.end(1), spans[-1][2] if spans else (), True))
            prose_start = fence.end()
    return spans
