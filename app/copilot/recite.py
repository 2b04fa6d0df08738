"""The [n] an operator opens should hold what its sentence quotes: markers moved to that source.

The prompt has the model open each answer, and often each sentence, with the `[n]` of its
source, so it picks the number before it writes the words. On session 21's 61 Slurm answers
the cited source held only 20 of 73 prose quotes: "[5] The node is currently executing a
job, but will not be allocated additional jobs." sent the operator to an FAQ, while the
words are the sinfo page's [2] (seen in the chat).

A sentence's evidence is its prose quotes (attribution.py) and the found commands of its
inline code and of the fenced blocks it introduces (grounding.py). A sentence with none of it
in a source it cites, and whose strong evidence (commands, and quotes of MIN_RECITE_WORDS
words or more) all stands in one passage, is shown citing that passage: the first of its
markers becomes `[k]`, k the lowest-numbered passage holding all of it, and the others go.
A four-word run such as "add the following to" or "trigger an event when" is a quote by the
provenance view's measure, but too common to move a citation on (on session 21's answers it
would have moved 8 sentences on such runs alone). Evidence spread over sources leaves the
markers as written (the misattribution notes still say where each piece is). The front ends show the corrected text
and say what was corrected; `Final.answer` and the token ids stay as generated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.copilot.attribution import placed_items, placed_quotes, sentence_spans
from app.copilot.events import GroundingItem, Recitation, Segment
from app.copilot.markers import MARKER_GROUP

MIN_RECITE_WORDS = 6  # a prose quote this long moves a citation; shorter ones only keep one where it is
_LATER_MARKER = re.compile(rf"[ \t]*{MARKER_GROUP.pattern}")


def recite(
    text: str, segments: Sequence[Segment], grounding: Sequence[GroundingItem], passage_texts: Mapping[int, str]
) -> tuple[str, list[Recitation]]:
    """`text` (the shown answer, split by provenance into `segments`) with the markers of each sentence whose
    evidence all stands in one uncited passage moved to it, and what was moved."""
    spans = sentence_spans(text)
    evidence: dict[int, list[tuple[str, tuple[int, ...], bool]]] = {}  # (text, holders, strong) per sentence
    for index, quote in placed_quotes(segments, passage_texts):
        evidence.setdefault(index, []).append((quote.text, quote.holders, len(quote.text.split()) >= MIN_RECITE_WORDS))
    for index, item in placed_items(text, grounding):
        if index is not None and item.found and item.holders and not item.adapted:  # held as written
            evidence.setdefault(index, []).append((item.text, item.holders, True))
    recitations: list[tuple[int, Recitation]] = []
    for index, found in evidence.items():
        begin, end, cited, _ = spans[index]
        strong = [(text, holders) for text, holders, is_strong in found if is_strong]
        if not cited or not strong or any(set(holders) & set(cited) for _, holders, _ in found):
            continue
        common = set.intersection(*(set(holders) for _, holders in strong))
        if common:
            recitations.append((index, Recitation(cited, min(common), strong[0][0])))
    out = text
    for index, recitation in sorted(recitations, key=lambda pair: -pair[0]):  # from the end: offsets stay valid
        begin, end, _, _ = spans[index]
        out = out[:begin] + _moved(out[begin:end], recitation.now) + out[end:]
    return out, [recitation for _, recitation in sorted(recitations, key=lambda pair: pair[0])]


def _moved(sentence: str, number: int) -> str:
    """`sentence` with its first marker group made [number] and every later one dropped."""
    first = MARKER_GROUP.search(sentence)
    if first is None:  # never: a sentence that cites has a marker
        return sentence
    rest = _LATER_MARKER.sub("", sentence[first.end() :])
    return f"{sentence[: first.start()]}[{number}]{rest}"
