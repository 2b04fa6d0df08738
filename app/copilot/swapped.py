"""A source's sentence told of another setting: its words verbatim, its subject swapped.

Asked how to let a job run past its wall-time limit, the model copied slurm.conf's "The
OverTimeLimit configuration parameter may permit the job to run longer than scheduled." and
then wrote the same sentence twice more with the subject changed: "[2] The KillWait
configuration parameter may permit the job to run longer than scheduled." (fresh3 `g-03`,
session 34). KillWait is a real parameter, the rest is verbatim and the [n] is right, so no
other check speaks; the sentence is false.

So a quote (quotes.py: the longest run a passage holds) of MIN_WORDS words or more is reported
when the answer puts a setting or an option right before it (`KillWait`) and the passage puts
another one right before it everywhere it holds the run (`OverTimeLimit`), the answer's one
not in that sentence of the passage. A quote that opens the passage's sentence has no subject
there to swap, and passes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from app.copilot.code_spans import without_fences
from app.copilot.definitions import SETTING
from app.copilot.events import Definition, Passage, Segment
from app.copilot.markers import MARKER_GROUP
from app.copilot.quotes import flat, mark_quotes, sentence_around

MIN_WORDS = 5  # shorter runs ("may be used to") are phrases many subjects share
_OPTION = re.compile(r"--?[A-Za-z][\w-]*")
_EDGES = "`'\"*()[],:;"


def swapped_subjects(answer: str, passages: Sequence[Passage]) -> list[Definition]:
    """One Definition per quote told of another setting: `name` the answer's subject, `term` the source's."""
    texts = {p.number: p.text for p in passages}
    flats = {number: flat(text) for number, text in texts.items()}
    titles = {p.number: p.title for p in passages}
    found: dict[tuple[str, str], Definition] = {}
    # inline code stays, its backticks dropped: the subject is often written as code (`KillWait`)
    for line in MARKER_GROUP.sub(" ", without_fences(answer).replace("`", "")).split("\n"):
        segments = mark_quotes([Segment(line)], texts)
        for before, quote in pairwise(segments):
            if quote.passage is None or before.passage is not None or len(quote.text.split()) < MIN_WORDS:
                continue
            said_of = _last_term(before.text)
            if said_of is None:
                continue
            run = flat(quote.text)
            source_term, sentence = _subject_in(flats[quote.passage], run, said_of)
            if source_term is not None and (said_of, run) not in found:
                found[(said_of, run)] = Definition(
                    said_of, source_term, quote.passage, titles[quote.passage], sentence, quoted=run, said_of=said_of
                )
    return list(found.values())


def _last_term(text: str) -> str | None:
    """The setting or option that `text` ends with, if its last word is one."""
    words = text.split()
    if not words or text[-1:].strip():  # the quote goes on inside the word: no subject of its own
        return None
    word = words[-1].strip(_EDGES)
    return word if _is_term(word) else None


def _is_term(word: str) -> bool:
    return bool(SETTING.fullmatch(word) or _OPTION.fullmatch(word))


def _subject_in(passage: str, run: str, said_of: str) -> tuple[str | None, str]:
    """(the passage's own subject of `run`, its sentence) when every place it holds `run` puts another setting
    or option right before it, none of whose sentences names `said_of`; else (None, '')."""
    subject, shown = None, ""
    for variant in dict.fromkeys((run, run[:1].swapcase() + run[1:])):
        for match in re.finditer(re.escape(variant), passage):
            words = passage[: match.start()].split()
            word = words[-1].strip(_EDGES) if words and not passage[match.start() - 1 : match.start()].strip() else ""
            sentence = sentence_around(passage, match.start(), match.end())
            if word.lower() == said_of.lower() or not _is_term(word) or said_of in sentence:
                return None, ""
            subject, shown = subject or word, shown or sentence
    return subject, shown
