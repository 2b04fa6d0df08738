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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from app.copilot.citations import cited_numbers
from app.copilot.code_spans import FENCE
from app.copilot.events import GroundingItem

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")


def attribute(answer: str, grounding: Sequence[GroundingItem]) -> list[GroundingItem]:
    """`grounding` (whose found items know their `holders`: grounding.py) with `cited` filled in for them."""
    units = _units(answer)
    return [replace(item, cited=_cited_around(item.text, units)) if item.holders else item for item in grounding]


def _units(answer: str) -> list[tuple[str, tuple[int, ...]]]:
    """The answer as (normalised text, markers it answers to): one per sentence or line of prose, and one
    per fenced block, which answers to the markers of the sentence before it."""
    units: list[tuple[str, tuple[int, ...]]] = []
    for number, part in enumerate(FENCE.split(answer)):
        if number % 2:  # inside a fence
            units.append((" ".join(part.split()), units[-1][1] if units else ()))
            continue
        for sentence in _SENTENCE_END.split(part):
            if sentence.strip():
                units.append((" ".join(sentence.split()), tuple(cited_numbers(sentence))))
    return units


def _cited_around(text: str, units: Sequence[tuple[str, tuple[int, ...]]]) -> tuple[int, ...]:
    """The markers of the first unit that holds `text`; () when it stands in none or in an unmarked one."""
    return next((markers for unit, markers in units if text in unit), ())
