"""Sentences a follow-up's answer says again from an earlier answer of its conversation.

The earlier answers stay in the prompt, and the 1.5B model often builds its next answer on the last one:
it keeps the new command and copies the old explanation around it. Asked "And how do I continue it later?"
after suspending a job, the answer gave `resume <job_list>`, then five sentences of the suspend answer word
for word; asked about heterogeneous jobs after job arrays, it kept the array answer's three sentences
(session 56: 3 of 37 sampled follow-up answers carried such sentences over). The operator has read them above, and
their `[n]` now points into this answer's sources, which may not say them (in the chat, "[5] The grand total
of licenses is displayed in the Count column" came back citing an `srun` page).

So the shown answer leaves such a sentence out, with a note. Only prose sentences long enough to tell
(MIN_SAID_CHARS) go; code stays, as a command may well be the next step again. An answer that would keep no
sentence of its own stays whole (`repeats_earlier_answer` warns of that one), and so does one whose code
blocks all come from an earlier answer: asked about heterogeneous jobs, the answer gave the array's
`sbatch --array=1-3 -N1 tmp` again, and its copied "This will submit a job array with three jobs" is what
tells the operator that the command answers the earlier question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.copilot.attribution import prose_sentences, sentence_spans
from app.copilot.repeats import MIN_KEY_CHARS, sentence_key, without_sentences

MIN_SAID_CHARS = 40  # "The sources do not cover this." (30) may well come again; a sentence of 40 says something
_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[.,;:!?])")  # "suspension [2]." says what "suspension." says


def said_before(answer: str, earlier: Sequence[str]) -> list[str]:
    """The prose sentences of `answer` (as written in it) that an `earlier` answer also wrote, when the answer
    keeps a sentence of its own without them; [] otherwise."""
    said = {_key(sentence) for text in earlier for sentence in prose_sentences(text)}
    again = [s for s in prose_sentences(answer) if len(key := _key(s)) >= MIN_SAID_CHARS and key in said]
    code, earlier_code = _code(answer), {block for text in earlier for block in _code(text)}
    if not again or (code and code <= earlier_code):
        return []  # its commands are an earlier answer's too: the words around them tell the reader so
    rest = prose_sentences(without_sentences(answer, again))
    return again if any(len(_key(s)) >= MIN_KEY_CHARS for s in rest) else []


def _key(sentence: str) -> str:
    return _BEFORE_PUNCTUATION.sub("", sentence_key(sentence))


def _code(text: str) -> set[str]:
    return {_key(text[begin:end]) for begin, end, _, fenced in sentence_spans(text) if fenced}
