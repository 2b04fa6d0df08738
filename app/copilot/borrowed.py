"""Words an answer took from the prompt's worked example rather than from the sources.

The prompt's demonstration (prompting.py) answers a question about backups: a snapshot is
restored with `bkp`, backups run nightly at 01:00. A 1.5B model imitates a demonstration
closely, and now and then carries its topic over: asked how to hold a Slurm job, it answered
"This will put the job on hold until the next scheduled backup [2]" (session 23, in the chat),
while no source and not the question spoke of backups. The grounding check cannot see this:
the sentence holds no command, and its words are plain English.

So when neither the question nor any passage touches the example's topic (`EXAMPLE_TOPIC`,
by word stem: "backups", "restored"), a sentence of the answer that names it is reported, and
the front ends warn that it comes from the prompt's example, not from the sources. A question
about backups ("roll back a database to yesterday's backup") may well be answered in the
example's words, so then nothing is reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.copilot.attribution import sentence_spans

# What only the worked example is about: a test holds each to occur in the demonstration
EXAMPLE_TOPIC = ("backup", "snapshot", "restore", "nightly", "vendor", "bkp")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def _stems(text: str) -> set[str]:
    from retrieval.index import english_stemmer  # BM25's own stemmer; imported here, as faiss and bm25s come with it

    return set(english_stemmer().stemWords([word.lower() for word in _WORD.findall(text)]))


def borrowed_sentences(answer: str, passages: Sequence[str], question: str) -> list[tuple[str, str]]:
    """(sentence, topic word) for each sentence of `answer` that names the example's topic, when neither
    `question` nor any of `passages` does."""
    topic = {next(iter(_stems(word))): word for word in EXAMPLE_TOPIC}  # stem -> the word
    if topic.keys() & set().union(_stems(question), *(_stems(p) for p in passages)):
        return []
    found = []
    for begin, end, _, fenced in sentence_spans(answer):
        if fenced:
            continue
        sentence = answer[begin:end].strip()
        named = sorted(topic.keys() & _stems(sentence))
        if named:
            found.append((sentence, topic[named[0]]))
    return found
