"""Two quantities of one unit compared the wrong way round in a sentence of the answer.

Asked "the hall B inlet temperature is 31C, what do I do?", the model gave the power runbook's first steps,
right, then "The hall B inlet temperature is 31C, which is above the warning threshold of 32 °C [1]. ... you
should start the shutdown yourself." (session 58, in the chat): 31 °C is below the runbook's 32 °C CRITICAL
trigger, and above its 27 °C WARNING. Every item is found and every word is a source's or the question's, so
no other check speaks, and the sentence tells an operator to shut a hall down.

A comparison needs no model: a quantity (specifics.py's reading, temperatures as typed read as "31 °C"),
then within a few words a comparing word ("above", "more than", "below", "less than"...), then within a few
more a second quantity of the same dimension, is checked by arithmetic. Only the wrong ones are reported.
Not one of the ~300 saved eval answers compares two quantities so (session 58); the check is for the rare
one that does, where it matters.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from itertools import pairwise

from app.copilot.attribution import prose_sentences
from app.copilot.code_spans import prose
from app.copilot.events import Miscomparison
from app.copilot.markers import MARKER_GROUP
from app.copilot.specifics import quantities, quantity_key
from app.copilot.thresholds import ABOVE_WORDS, BELOW_WORDS, with_degrees

_ABOVE = re.compile(rf"\b(?:{ABOVE_WORDS})\b", re.I)
_BELOW = re.compile(rf"\b(?:{BELOW_WORDS})\b", re.I)
_RELATIONS: list[tuple[re.Pattern[str], Callable[[float, float], bool], str]] = [
    (_ABOVE, operator.gt, "above"),
    (_BELOW, operator.lt, "below"),
]
MAX_BEFORE = 3  # words between the first quantity and the comparing word (", which is")
MAX_AFTER = 5  # words between the comparing word and the second quantity ("the warning threshold of")


def wrong_comparisons(answer: str) -> list[Miscomparison]:
    """The comparisons of two quantities in the answer's prose that arithmetic contradicts, in order."""
    found: list[Miscomparison] = []
    for sentence in prose_sentences(MARKER_GROUP.sub(" ", prose(answer))):
        sentence = with_degrees(sentence)
        for (start, first), (end, second) in pairwise(quantities(sentence)):
            between = sentence[start + len(first) : end]
            for pattern, holds, relation in _RELATIONS:
                if (word := pattern.search(between)) is None:
                    continue
                near = len(between[: word.start()].split()) <= MAX_BEFORE
                near = near and len(between[word.end() :].split()) <= MAX_AFTER
                (a, unit), (b, other) = quantity_key(first), quantity_key(second)
                if near and unit is not None and unit == other and not holds(a, b):
                    found.append(Miscomparison(first, relation, second))
                break
    return found
