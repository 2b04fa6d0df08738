"""Words an answer took from the prompt's worked example rather than from the sources.

The prompt's demonstration (prompting.py) answers a question about backups: a snapshot is
restored with `bkp`, backups run nightly at 01:00. A 1.5B model imitates a demonstration
closely, and now and then carries its topic over: asked how to hold a Slurm job, it answered
"This will put the job on hold until the next scheduled backup [2]" (session 23, in the chat),
while no source and not the question spoke of backups. The grounding check cannot see this:
the sentence holds no command, and its words are plain English.

So a sentence of the answer is reported, and the front ends warn that it comes from the
prompt's example, not from the sources, when
- it names the example's topic (`EXAMPLE_TOPIC`, by word stem: "backups", "restored") and
  neither the question nor any passage touches that topic. A question about backups ("roll back
  a database to yesterday's backup") may well be answered in the example's words;
- or it copies a run of `EXAMPLE_RUN` words from the example that no passage, the question or
  the prompt's instructions hold. Asked to run one script on 500 files, an answer ended "...
  in the `input` directory: backups run nightly at 01:00 [2]." (session 26). The topic caught
  it there, but Slurm's pages speak of backup controllers: had one been among the passages,
  the topic would have been no evidence and the sentence would have gone unreported. Four
  words are a run when one of them is a number of the example's: its numbers are made up, and
  "Yesterday's node is in it: squeue runs nightly at 01:00 [3]." (session 32) copied only
  "nightly at 01:00". Of the 168 saved answers of session 32's five sets, that one alone changed.
  A number the question gives is the user's: asked to start a job at 1am, "the job will start at
  01:00" copies nothing (the five-word runs still count).

A sentence that copies such a run is left out of the shown answer (`without_copied`), with a
note that says so: in session 32 two of twenty Slurm answers ended on the example's closing line
("Yesterday's job is in it: backups run nightly at 01:00 [2]." for jobs that finished
yesterday), citing a Slurm page for a schedule only the example has. Nothing but the example
backs those words. A sentence that only names the topic stays, with the warning: its words may
still carry the answer ("This will put the job on hold until the next scheduled backup").
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cache

from app.copilot.attribution import prose_sentences
from app.copilot.code_spans import WORD_EDGES
from app.copilot.events import GroundingItem
from app.copilot.markers import MARKER_GROUP
from app.copilot.repeats import without_sentences

# What only the worked example is about: a test holds each to occur in the demonstration
EXAMPLE_TOPIC = ("backup", "snapshot", "restore", "nightly", "vendor", "bkp")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
EXAMPLE_RUN = 5  # words in a row: "backups run nightly at 01:00" is six ("01", "00")
# A shorter run counts when it carries one of the example's numbers: they are made up ("squeue runs nightly at
# 01:00" copies four words, "nightly at 01 00"), while four everyday words are not evidence ("it from the latest").
NUMBER_RUN = 4
_TOKEN = re.compile(r"[A-Za-z0-9]+")


def _stems(text: str) -> set[str]:
    from retrieval.stemming import english_stemmer  # BM25's own stemmer, without the index's imports

    return set(english_stemmer().stemWords([word.lower() for word in _WORD.findall(text)]))


def borrowed_sentences(answer: str, passages: Sequence[str], question: str) -> list[tuple[str, str]]:
    """(sentence, what it took) for each prose sentence of `answer` that names the example's topic when neither
    `question` nor any of `passages` does (what: the topic word), or that copies a run of the example's words
    no passage, the question or the instructions hold (what: the run, as the answer writes it)."""
    topic = {next(iter(_stems(word))): word for word in EXAMPLE_TOPIC}  # stem -> the word
    if topic.keys() & set().union(_stems(question), *(_stems(p) for p in passages)):
        topic = {}  # brought up by the user or a source: the topic is no evidence
    elsewhere = _elsewhere(passages, question)
    found = []
    for sentence in prose_sentences(answer):
        named = sorted(topic.keys() & _stems(sentence))
        copied = named or _copied_run(sentence, elsewhere)
        if copied:
            found.append((sentence, topic[named[0]] if named else copied))
    return found


def without_copied(answer: str, passages: Sequence[str], question: str) -> tuple[str, list[tuple[str, str]]]:
    """`answer` without each prose sentence that copies a run of the example's words no passage, the question or
    the instructions hold, and those (sentence, run). An answer made of nothing else comes back whole, with none:
    borrowed_sentences then warns of it."""
    elsewhere = _elsewhere(passages, question)
    copied = [(sentence, run) for sentence in prose_sentences(answer) if (run := _copied_run(sentence, elsewhere))]
    kept = without_sentences(answer, [sentence for sentence, _ in copied])
    return (kept, copied) if kept else (answer, [])


def with_example_words(items: Sequence[GroundingItem], passages: Sequence[str], question: str) -> list[GroundingItem]:
    """`items`, each not found one carrying the words it took from the worked example's command (`bkp restore
    --snapshot latest --path FILE --to /srv/restore`) that no passage or the question holds: its tool, options
    and paths, not its plain words. Asked for a script run as root when a job starts (fresh10 `s10-11`), an
    answer wrote `echo ... > /srv/restore` into an epilog line, and "not found in the sources" alone did not say
    where the path came from."""
    held = set().union(*(_code_words(text) for text in (*passages, question)))
    own = _example_code_words() - held
    marked = []
    for item in items:
        taken = () if item.found else tuple(word for word in _code_words(item.text) if word in own)
        marked.append(replace(item, from_example=taken) if taken else item)
    return marked


@cache
def _example_code_words() -> frozenset[str]:
    """The worked example's command: its tool and the words of it that are options or paths."""
    from app.copilot.prompting import DEMONSTRATION  # prompting imports the runner

    answer = DEMONSTRATION[-1]["content"]
    line = answer.split("```")[1].strip()
    tool, *rest = line.split()
    return frozenset({tool, *(word for word in rest if word.startswith("-") or "/" in word)})


def _code_words(text: str) -> list[str]:
    """`text`'s words with the quotes, brackets and punctuation around them taken off, each once, in order (a
    set's order changes from run to run, and the flag lists them as the answer writes them)."""
    return list(dict.fromkeys(word for word in (w.strip(WORD_EDGES + "<>") for w in text.split()) if word))


def _elsewhere(passages: Sequence[str], question: str) -> set[tuple[str, ...]]:
    """Runs the passages or the question hold, and the example's short runs whose numbers the question gives:
    asked to start a job at 1am, "the job will start at 01:00" is the user's time, not the example's."""
    held = set().union(*(_runs(_words(text)) for text in (*passages, question)))
    asked = _numbers(re.findall(r"\d+", question))  # "1am" gives 1
    return held | {run for run in _example_runs() if len(run) == NUMBER_RUN and _numbers(run) <= asked}


def _numbers(words: Sequence[str]) -> set[int]:
    """The nonzero numbers among `words` (`01` is 1; the `00` of a time says nothing)."""
    return {int(word) for word in words if word.isdigit() and int(word)}


def _copied_run(sentence: str, elsewhere: set[tuple[str, ...]]) -> str:
    """The longest stretch of `sentence` made of runs of the example's own words held nowhere else, '' if none."""
    tokens = list(_tokens(MARKER_GROUP.sub(lambda m: " " * len(m.group()), sentence)))
    words = [word for word, _, _ in tokens]
    own = _example_runs()
    spans = [  # (first token, last token) of each run
        (i, i + len(run) - 1)
        for size in (NUMBER_RUN, EXAMPLE_RUN)
        for i, run in enumerate(_windows(words, size))
        if run in own and run not in elsewhere
    ]
    if not spans:
        return ""
    stretches: list[list[int]] = []  # overlapping runs joined
    for first, last in sorted(spans):
        if stretches and first <= stretches[-1][1]:
            stretches[-1][1] = max(stretches[-1][1], last)
        else:
            stretches.append([first, last])
    first, last = max(stretches, key=lambda pair: pair[1] - pair[0])
    return sentence[tokens[first][1] : tokens[last][2]]


@cache
def _example_runs() -> frozenset[tuple[str, ...]]:
    """Runs of words of the worked example (its sources and answers) that the instructions do not hold."""
    from app.copilot.prompting import DEMONSTRATION, REMINDER, SYSTEM_PROMPT  # prompting imports the runner

    example = _runs([w for message in DEMONSTRATION for w in _words(message["content"])])
    return frozenset(example - _runs(_words(SYSTEM_PROMPT + "\n" + REMINDER)))


def _tokens(text: str) -> Iterator[tuple[str, int, int]]:
    for match in _TOKEN.finditer(text):
        yield match.group().lower(), match.start(), match.end()


def _words(text: str) -> list[str]:
    return [word for word, _, _ in _tokens(text)]


def _windows(words: list[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + size]) for i in range(len(words) - size + 1)]


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    """The word runs that count: every EXAMPLE_RUN words, and every NUMBER_RUN words with a number among them."""
    short = {run for run in _windows(words, NUMBER_RUN) if any(word.isdigit() for word in run)}
    return set(_windows(words, EXAMPLE_RUN)) | short
