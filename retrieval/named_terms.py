"""The entry that defines an option or setting a question writes out (`--exclusive`, `SlurmctldTimeout`).

Asked "What does the --exclusive option of sbatch do?", neither retriever found sbatch's `--exclusive` entry:
the page uses "exclusive" in forty other places, and MiniLM reads the question as being about sbatch in
general, so the six passages held other options and the answer's `--exclusive` was flagged as in no source.
"What is SlurmctldTimeout?" fared the same: its definition closes a chunk that starts with another setting's.

A question that writes an option (`--exclusive`, `-R`), a CamelCase setting (`SlurmctldTimeout`), a
snake_case one (`max_check_attempts`) or an environment variable (`SLURM_JOB_ID`) is looked up in the terms of
the definition-list entries the chunks hold (`Chunk.terms`, from the readers' entries). For each such name
with an entry, the chunk holding it comes first among the passages, unless the passages hold it already:
the one on a page the question names (`sbatch`, `slurm.conf`), else the best ranked by the fused retrieval.
A short option (`-R`) means something else on every page, so it is only looked up on a page the question names.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

from retrieval.chunking import Chunk

MAX_PINNED = 2  # passages given to written-out names, at most: the rest stay the retrievers'
_OPTION = r"--?[A-Za-z][\w-]*"
_TERM_OPTION = re.compile(r"(?<![\w-])" + _OPTION)
_TERM_NAME = re.compile(r"[A-Za-z_][\w.]*")  # a term that opens with a name: `MaxJobs=<max_jobs>`, `SlurmctldTimeout`
_LONG_OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
_SHORT_OPTION = re.compile(r"(?<![\w-])-[A-Za-z]\b(?!-)")
_SETTING = re.compile(
    r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"  # CamelCase: SlurmctldTimeout, ReqNodeNotAvail
    r"|[a-z][a-z0-9]*(?:_[a-z0-9]+)+"  # snake_case: max_check_attempts
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b"  # environment variables: SLURM_JOB_ID
)
_WORD = re.compile(r"[\w.-]+")


def term_names(term: str) -> set[str]:
    """The names an entry's term defines: `-d, --dependency=<list>` -> {-d, --dependency};
    `SlurmctldTimeout` -> {SlurmctldTimeout}; `MaxJobs=<max_jobs>` -> {MaxJobs}."""
    names = set(_TERM_OPTION.findall(term))
    first = _TERM_NAME.match(term)
    if first:
        names.add(first.group().rstrip("."))
    return names


class NamedTerms:
    """Which chunks hold the entry of each name, built once per index generation."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = chunks
        self.rows: dict[str, list[int]] = defaultdict(list)
        for row, chunk in enumerate(chunks):
            for name in {name for term in chunk.terms for name in term_names(term)}:
                self.rows[name].append(row)

    def pinned(self, question: str, order: Mapping[int, int], held: set[int]) -> dict[int, str]:
        """The rows to put first for `question`, each with the name it holds the entry of: per written-out
        name with an entry, its best chunk (by `order`, the fused rank of each row), on a page the question
        names where one holds it; none for a name whose entry a row of `held` (the passages as retrieved)
        holds already."""
        if not self.rows:
            return {}
        # the pages the question names; a follow-up's query is the follow-up, then the questions before it
        # ("what about srun?" after sbatch's --exclusive): the page its first line names, where it names one
        lines = [{word.lower() for word in _WORD.findall(line)} for line in question.splitlines() or [""]]
        pinned: dict[int, str] = {}
        for name, short in _written_names(question):
            rows = self.rows.get(name, [])
            named = self._on_named_page(rows, lines)
            candidates = named if short or named else rows
            if not candidates or held.intersection(candidates) or len(pinned) == MAX_PINNED:
                continue
            best = min(candidates, key=lambda row: order.get(row, len(order)))
            pinned.setdefault(best, name)
            if self._continued(best, name):  # the term closes its chunk, and its description opens the next
                pinned.setdefault(best + 1, name)
        return pinned

    def _continued(self, row: int, name: str) -> bool:
        """Does the chunk after `row` go on with the entry of `name` that `row` holds (neighbours.py then
        joins the two into one passage)?"""
        if row + 1 >= len(self.chunks) or self.chunks[row + 1].source != self.chunks[row].source:
            return False
        going_on = self.chunks[row + 1].entry.split(" > ")
        return any(term in going_on for term in self.chunks[row].terms if name in term_names(term))

    def _on_named_page(self, rows: list[int], lines: list[set[str]]) -> list[int]:
        """`rows` on the pages named by the first of `lines` (each a line's words) to name any of theirs."""
        for words in lines:
            named = [row for row in rows if self.chunks[row].title.lower() in words]
            if named:
                return named
        return []


def from_entry(passage: Chunk, name: str) -> Chunk:
    """`passage` from the line of the entry that defines `name` on, where other entries' text comes first
    ("- debug5 ... - SlurmctldTimeout - The interval ..."): the model reads the definition first, and the
    passage is no longer labelled with an entry it no longer goes on with."""
    for term in passage.terms:
        if name in term_names(term):
            line = re.search(r"^[ \t]*- " + re.escape(term) + r"[ \t]*$", passage.text, re.M)
            if line and line.start() > 0:
                start = line.start()
                position = replace(passage.position, start=passage.position.start + start)
                return replace(passage, text=passage.text[start:], position=position, entry="")
    return passage


def written_names(text: str) -> list[str]:
    """The options and setting names `text` writes out (`--exclusive`, `SlurmctldTimeout`, `-R`), in order."""
    return [name for name, _ in _written_names(text)]


def _written_names(question: str) -> list[tuple[str, bool]]:
    """The options and setting names a question writes out, in order, each with whether it is a short option."""
    found = [(m.start(), m.group(), False) for pattern in (_LONG_OPTION, _SETTING) for m in pattern.finditer(question)]
    found += [(m.start(), m.group(), True) for m in _SHORT_OPTION.finditer(question)]
    names: dict[str, bool] = {}
    for _, name, short in sorted(found):
        names.setdefault(name, short)
    return list(names.items())
