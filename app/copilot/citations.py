"""Where the answer came from: its [n] markers, the spans the drafter copied, the source list.

Two kinds of evidence, shown side by side because the small default model often writes
no [n] at all: the markers the model wrote (checked against the passages that exist) and
provenance: each token the drafter copied knows the passage it came from, and the runs the
model wrote itself that a passage holds verbatim are found by text (quotes.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.copilot.events import Citations, Passage, Segment
from app.copilot.markers import cited_numbers
from app.copilot.quotes import mark_quotes, with_quotes

# a saved answer's drafter copies: (start, end, passage) spans in its text, and tokens copied per passage
Copies = tuple[Sequence[Sequence[int]], Mapping[int, int]]


def passage_of(origin: str) -> int | None:
    """The passage number of an origin label "passage:N", else None."""
    return int(origin.split(":", 1)[1]) if origin.startswith("passage:") else None


def build_citations(
    answer: str,
    output_ids: Sequence[int],
    origins: Sequence[str],
    passages: Sequence[Passage],
    decode: Callable[[Sequence[int]], str],
    copies: Copies | None = None,
) -> Citations:
    """The answer's markers and provenance: the drafter's copies from its token `origins`, or, for a saved answer
    (`copies`: the spans and per-passage token counts `Citations` recorded live), from those."""
    markers = cited_numbers(answer)
    existing = {p.number for p in passages}
    if copies is None:
        copied = Counter(n for n in map(passage_of, origins) if n is not None)
        drafted = provenance_segments(answer, output_ids, origins, decode)
    else:
        copied, drafted = Counter(copies[1]), segments_of(answer, copies[0])
    return Citations(
        markers=markers,
        invalid=[n for n in markers if n not in existing],
        copied=dict(sorted(copied.items())),
        # the drafter's copies, and the quotes the model wrote itself (quotes.py)
        segments=with_quotes(drafted, {p.number: p.text for p in passages}),
        spans=copied_spans(drafted),
    )


def copied_spans(segments: Sequence[Segment]) -> tuple[tuple[int, int, int], ...]:
    """(start, end, passage) of each copied segment of an answer split by provenance."""
    spans, start = [], 0
    for segment in segments:
        if segment.passage is not None:
            spans.append((start, start + len(segment.text), segment.passage))
        start += len(segment.text)
    return tuple(spans)


def segments_of(answer: str, spans: Sequence[Sequence[int]]) -> list[Segment]:
    """The answer split by provenance again, from its copied spans (`copied_spans`)."""
    segments, at = [], 0
    for start, end, passage in sorted(tuple(span) for span in spans):
        if not at <= start < end <= len(answer):
            raise ValueError(f"copied span {start}-{end} does not fit an answer of {len(answer)} characters")
        segments += [Segment(answer[at:start]), Segment(answer[start:end], passage)]
        at = end
    return _merge([segment for segment in [*segments, Segment(answer[at:])] if segment.text])


def of_shown_text(citations: Citations, shown: str, passages: Sequence[Passage]) -> Citations:
    """`citations` for the text shown in place of the answer (repeats.py): its markers, and its quotes
    found by text (the drafter's token origins belong to the answer as written)."""
    markers = cited_numbers(shown)
    existing = {p.number for p in passages}
    return replace(
        citations,
        markers=markers,
        invalid=[n for n in markers if n not in existing],
        segments=mark_quotes([Segment(shown)], {p.number: p.text for p in passages}),
    )


def no_citations(passages: Sequence[Passage]) -> Citations:
    """What a text the user does not read as an answer cites: nothing (a refusal, a withheld answer)."""
    return build_citations("", [], [], passages, lambda ids: "")


def provenance_segments(
    answer: str, output_ids: Sequence[int], origins: Sequence[str], decode: Callable[[Sequence[int]], str]
) -> list[Segment]:
    """Split the answer text into runs of tokens with one provenance (a passage, or none).

    A run's text is found by decoding the token prefix at each run boundary, so multi-token
    characters and merged spaces land where the full decode puts them. The tail of the text
    past the last token (never, unless a stop string cut it) is clamped.
    """
    runs: list[tuple[int | None, int]] = []  # (passage, end token index)
    for i, origin in enumerate(origins[: len(output_ids)]):
        passage = passage_of(origin)
        if runs and runs[-1][0] == passage:
            runs[-1] = (passage, i + 1)
        else:
            runs.append((passage, i + 1))
    segments, start = [], 0
    for index, (passage, end) in enumerate(runs):
        stop = len(answer) if index == len(runs) - 1 else min(len(decode(output_ids[:end])), len(answer))
        if stop > start:
            segments.append(Segment(answer[start:stop], passage))
            start = stop
    if start < len(answer):
        segments.append(Segment(answer[start:], None))
    return _merge(segments)


def _merge(segments: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for segment in segments:
        if merged and merged[-1].passage == segment.passage:
            merged[-1] = Segment(merged[-1].text + segment.text, segment.passage)
        else:
            merged.append(segment)
    return merged


def source_list(passages: Sequence[Passage], citations: Citations) -> list[dict[str, Any]]:
    """Every passage of the prompt with title, heading, path, score, and whether it was cited or copied."""
    cited = set(citations.valid)
    return [
        {
            "number": p.number,
            "title": p.title,
            "heading": p.heading,
            "entry": p.entry,
            "path": p.source,
            "score": p.score,
            "cited": p.number in cited,
            "copied_tokens": citations.copied.get(p.number, 0),
            "text": p.text,
        }
        for p in passages
    ]
