"""Does an answer abstain, i.e. say that the sources do not cover the question?

One detector for the eval's score and the copilot's own rules (an own-site answer that says the sources
lack the value is shown, withhold.py), so what is withheld and what is scored as abstaining cannot drift.

The rule (a documented heuristic, tested on handwritten positives and negatives in
tests/app/test_abstention.py): an answer abstains when it contains an abstention phrase
AND that phrase is in its lead (first two sentences) or the answer is short (at most three
sentences). So "The passages do not cover X." abstains, while a full answer that ends
with an aside such as "the context does not say which version added it" does not.

Abstention phrases, matched case-insensitively:
- the sources are absent: "(the|these|provided) context/passages/sources/documents/
  documentation ... do(es) not / don't / doesn't (contain|cover|mention|include|provide|
  say|describe|specify|explain|address|answer|discuss|give)";
- "not (mentioned|covered|found|described|provided|specified|addressed|discussed|included)
  in the context/passages/sources/...";
- no information: "there is no (information|mention|answer|details?)", "no (relevant)
  information (about|on|regarding)", "(contain|contains|provide|provides) no information";
- inability: "I (cannot|can't|could not|couldn't|am unable to|'m unable to) (find|answer|
  determine|tell|say|locate)", "I don't (know|have (enough )?information)",
  "cannot be (determined|answered|found) from", "(is|are) not (available |present )?in the
  (context|passages|sources|documents)", "(beyond|outside) the scope of the (context|...)".
"""

from __future__ import annotations

import re

_SOURCES = r"(?:context|passages?|sources?|documents?|documentation|docs|information provided|excerpts?|texts?)"
_VERBS = (
    r"(?:contain|cover|mention|include|provide|say|describe|specify|explain|address|answer|discuss|give|"
    r"state|list|detail|offer|have)"
)
_PATTERNS = [
    rf"\b(?:the|these|those|provided|given|available)\b[^.\n]{{0,40}}?\b{_SOURCES}\b[^.\n]{{0,30}}?"
    rf"\b(?:do|does|did)\s+not\s+(?:\w+\s+)?{_VERBS}",
    rf"\b{_SOURCES}\b[^.\n]{{0,30}}?\b(?:don't|doesn't|didn't)\s+(?:\w+\s+)?{_VERBS}",
    r"\bnot\s+(?:explicitly\s+|directly\s+|specifically\s+)?(?:mentioned|covered|found|described|provided|specified|"
    rf"addressed|discussed|included|given|stated|listed)\s+(?:in|by|within)\s+(?:the\s+|any\s+of\s+the\s+)?"
    rf"(?:given\s+|provided\s+)?{_SOURCES}",
    r"\bthere\s+(?:is|are)\s+no\s+(?:relevant\s+|specific\s+)?(?:information|mention|answer|details?|data)\b",
    r"\bno\s+(?:relevant\s+|specific\s+)?information\s+(?:about|on|regarding|concerning|is\s+given|is\s+provided)",
    r"\b(?:contains?|provides?|gives?|has)\s+no\s+(?:relevant\s+|specific\s+)?information\b",
    r"\bI\s+(?:cannot|can't|can not|could\s+not|couldn't|am\s+unable\s+to|'m\s+unable\s+to|was\s+unable\s+to)\s+"
    r"(?:find|answer|determine|tell|say|locate|provide)",
    r"\bI\s+(?:don't|do\s+not)\s+(?:know|have\s+(?:enough\s+|sufficient\s+|any\s+)?information)",
    r"\bcannot\s+be\s+(?:determined|answered|found|inferred)\s+(?:from|based\s+on|with)",
    rf"\b(?:is|are)\s+not\s+(?:available\s+|present\s+)?in\s+the\s+(?:given\s+|provided\s+)?{_SOURCES}",
    rf"\b(?:beyond|outside)\s+(?:the\s+)?scope\s+of\s+the\s+(?:given\s+|provided\s+)?{_SOURCES}",
]
_ABSTAIN = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
LEAD_SENTENCES = 2
SHORT_SENTENCES = 3


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def abstention_phrase(text: str) -> str | None:
    """The first abstention phrase in `text`, or None."""
    match = _ABSTAIN.search(text.replace("’", "'"))
    return match.group(0) if match else None


def abstains(answer: str) -> bool:
    """True when the answer says the sources do not cover the question (see the module rule)."""
    parts = sentences(answer)
    if not parts:
        return False
    if len(parts) <= SHORT_SENTENCES:
        return abstention_phrase(answer) is not None
    return abstention_phrase(" ".join(parts[:LEAD_SENTENCES])) is not None
