"""The prompt's `[n]` placeholder written where a source's number belongs: the answer ends there.

The prompt asks for citations "as [n]", and now and then the model writes that placeholder itself. Where it stands
for a value ("the on-call administrator is [n]") the answer is withheld (withhold.py). Where it follows words that
lead to a citation ("as described in the [n]", "see [n]"), or opens a sentence or line, the model meant to cite and
had no number: fresh8 `s8-10`, a right answer on sbatch's output file, was withheld whole for its last five words.
Such an answer stops at the placeholder and is shown up to the words that led to it.
"""

from __future__ import annotations

import re

from app.copilot.code_spans import prose_so_far

TEMPLATE = re.compile(r"\[[nN]\]")
# words that lead to a citation, or the start of a sentence or line, right before the placeholder
_LEADS_TO_CITATION = re.compile(
    r"(?:,\s*)?\b(?:(?:as\s+(?:\w+\s+)?|\w+ed\s+)?(?:in|at|from|on|under)|see|according\s+to|refer\s+to)(?:\s+the)?"
    r"[\s(]*\Z"
    r"|(?:\A|(?<=[.!?:])\s|\n)[\s(]*\Z",
    re.I,
)


def unnumbered_citation(text: str) -> int | None:
    """Where the shown answer ends when its prose writes the `[n]` placeholder as a citation (`_LEADS_TO_CITATION`):
    before the words leading to it, trailing spaces and commas dropped. None when it writes none, or writes the
    first one where a value may belong."""
    for match in TEMPLATE.finditer(text):
        if not TEMPLATE.search(prose_so_far(text[: match.end()])):
            continue  # in code
        lead = _LEADS_TO_CITATION.search(text, 0, match.start())
        if lead is None:
            return None
        return len(text[: lead.start()].rstrip(" \t,;("))
    return None
