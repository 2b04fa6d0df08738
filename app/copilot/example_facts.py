"""A source example's facts told of the operator's own job, node or time.

Documentation shows example output: a job's start and end times, its exit code, the node it ran on. Asked
"How do I see why job 4512 is still pending?", the model gave the sacct example of its source, then wrote
"Job 4512 is still pending because it had a dependency on another job and was still PENDING from 11:20:00
until it started at 11:21:13." (session 59, in the chat and again in the own-values probe). The times are
the example job's; no source can know anything of job 4512. Every value is found somewhere, so no other
check speaks, and the operator reads a diagnosis of their own job.

So a sentence of the answer's prose is reported when it names a value of the question (a job id, a host, a
time or a date: example_values.py's shapes) and also values of those shapes that the question does not give
and a passage writes, unless that passage writes the question's value too (its example is then the same job).
Values of those shapes that no passage writes at all are reported the same way (source 0): "This will start job
5521 at 11:30:00", "The maximum resident set size (RSS) of job 3310 is 123456789 bytes" (the own-values probe).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import takewhile

from app.copilot.attribution import prose_sentences
from app.copilot.code_spans import prose
from app.copilot.documentation_values import documentation_values
from app.copilot.events import ExampleFact, Passage
from app.copilot.example_values import same_value, values_by_shape, writes
from app.copilot.markers import MARKER_GROUP


def example_facts(answer: str, passages: Sequence[Passage], asked: str) -> list[ExampleFact]:
    """The sentences of the answer's prose that tell the question's own value (`asked`: the conversation's
    questions) what a passage's example gives, in order; then those that give a name or address reserved for
    documentation (`reserved_told`)."""
    return _told_of_your_value(answer, passages, asked) + reserved_told(answer, passages, asked)


def reserved_told(answer: str, passages: Sequence[Passage], asked: str) -> list[ExampleFact]:
    """The sentences of the answer's prose (inline code included) that give a documentation example's name or
    address (documentation_values.py) when the question asks of "our" or "my" something: no server, mailbox or
    address of the operator's has one, so the answer told them an example's as theirs. A command or configuration
    block that writes one stays an example to adapt, and is not reported."""
    own = _yours(asked)
    if not own:
        return []
    found = []
    for sentence in prose_sentences(MARKER_GROUP.sub(" ", answer)):
        if values := tuple(documentation_values(sentence)):
            source = next((p.number for p in passages if any(writes(p.text, v) for v in values)), 0)
            found.append(ExampleFact(" ".join(sentence.split()), own, values, source, reserved=True))
    return found


# what the operator's own thing is called: the words after "our" or "my", up to one that starts a new part
_YOURS = re.compile(r"\b(?:our|my)\s+([a-z][\w-]*(?:\s+[a-z][\w-]*){0,2})", re.I)
_ENDS_THE_NAME = {
    "of", "for", "in", "on", "at", "to", "from", "with", "by", "that", "which", "who", "the", "a", "an", "this",
    "these", "and", "or", "when", "if", "right", "now", "tonight", "today", "still", "only", "just", "also",
    "is", "are", "was", "were", "be", "has", "have", "had", "can", "could", "will", "would", "should", "must",
    "may", "might", "do", "does", "did", "get", "gets", "got", "take", "takes", "seem", "seems", "show", "shows",
    "use", "uses", "run", "runs", "fail", "fails", "keep", "keeps", "say", "says", "list", "lists",
}  # fmt: skip


def _yours(asked: str) -> str:
    """The question's name for the operator's own thing ("central log server" of "...of our central log
    server?"), or "" when it asks of none."""
    for match in _YOURS.finditer(asked):
        words = list(takewhile(lambda word: word.lower() not in _ENDS_THE_NAME, match.group(1).split()))
        if words:
            return " ".join(words)
    return ""


def _told_of_your_value(answer: str, passages: Sequence[Passage], asked: str) -> list[ExampleFact]:
    yours = [value for values in values_by_shape(asked).values() for value in values]
    if not yours:
        return []
    texts = [(passage.number, " ".join(passage.text.split())) for passage in passages]
    found: list[ExampleFact] = []
    for sentence in prose_sentences(MARKER_GROUP.sub(" ", prose(answer))):
        said = list(dict.fromkeys(value for values in values_by_shape(sentence).values() for value in values))
        own = [value for value in said if any(same_value(value, mine) for mine in yours)]
        other = [value for value in said if value not in own]
        if not own or not other:
            continue
        told = " ".join(sentence.split())
        for number, text in texts:
            theirs = tuple(value for value in other if writes(text, value))
            if theirs and not any(writes(text, value) for value in own):
                found.append(ExampleFact(told, named(own[0], asked), theirs, number))
                break
        else:  # values no passage writes at all: the model's own, told of the operator's job as facts
            if invented := tuple(value for value in other if not any(writes(text, value) for _, text in texts)):
                found.append(ExampleFact(told, named(own[0], asked), invented, 0))
    return found


_NOT_A_NOUN = {"the", "is", "at", "to", "from", "of", "for", "and", "until", "by", "on", "in", "with", "was", "are"}


def named(value: str, asked: str) -> str:
    """`value` with the word the question puts before it when that names what it is ("job 4512", "node c042")."""
    before = re.search(rf"([A-Za-z]{{3,}})\s+{re.escape(value)}(?![\w:])", asked)
    return f"{before.group(1).lower()} {value}" if before and before.group(1).lower() not in _NOT_A_NOUN else value
