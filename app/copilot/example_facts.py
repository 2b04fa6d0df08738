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

from app.copilot.attribution import prose_sentences
from app.copilot.code_spans import prose
from app.copilot.events import ExampleFact, Passage
from app.copilot.example_values import same_value, values_by_shape, writes
from app.copilot.markers import MARKER_GROUP


def example_facts(answer: str, passages: Sequence[Passage], asked: str) -> list[ExampleFact]:
    """The sentences of the answer's prose that tell the question's own value (`asked`: the conversation's
    questions) what a passage's example gives, in order."""
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
