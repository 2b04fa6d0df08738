"""An answer quoting the description of an entry it does not name: the neighbour's words.

Man pages and state tables are definition lists of look-alike entries, and the small model
copies the wrong one's description as readily as the right one's. Asked what a node in
DRAIN means, an answer quoted sinfo's line "The node is currently executing a job, but is
expected to fail soon and is unavailable for use per system administrator request", which
is FAILING's (session 27, in the chat). The quote is verbatim and its [n] is right, so no
other check says anything.

So a run of MIN_WORDS words or more of the answer's prose that the description of one entry
holds, and no other entry's, is reported when neither the question nor the rest of the answer
names that entry. A word names it when one starts with the other, in any case for a code
(`drain` names DRAINING and DRAINED), exactly for an option (`-m` is not `-M`), and for a setting
as `_named` says (a plain word that starts it does not: "pending" is no PendingTime). Only
entries headed by an option, a setting (`TimeLimit`) or a code of capitals count: a list of
plain words may be any bulleted list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.copilot.code_spans import FENCE, inline_code, prose, without_fences
from app.copilot.definitions import SETTING, Entry, entries_of, first_sentence
from app.copilot.events import Definition, Passage, Segment
from app.copilot.markers import MARKER_GROUP
from app.copilot.quotes import flat, holds, mark_quotes

MIN_WORDS = 8  # shorter runs are common phrases ("for each user on each cluster") or open several entries alike
MIN_CHARS = 40
_CODE = re.compile(r"[A-Z][A-Z0-9_]{2,}")  # a code of 3 capitals or more (MIX, IDLE); a setting is definitions.SETTING
_WORD = re.compile(r"--?[A-Za-z][\w-]*|\w[\w-]*")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")  # the words of a setting's name: Pending, Time; TRES, Billing


def neighbour_quotes(answer: str, passages: Sequence[Passage], question: str) -> list[Definition]:
    """One Definition per entry whose description the answer quotes without naming it, `quoted` set to the run."""
    entries = [entry for passage in passages for entry in entries_of(passage) if _coded(entry)]
    if not entries:
        return []
    text = flat(MARKER_GROUP.sub(" ", prose(answer)))
    code = " ".join([*(m.group(0) for m in FENCE.finditer(answer)), *inline_code(without_fences(answer))])
    found: dict[str, Definition] = {}
    for run, holders in _runs(text, passages, entries):
        terms = {entry.term for entry in holders}
        if len(terms) != 1:  # a sentence many entries share ("See the update node command ...")
            continue
        entry = holders[0]
        rest = (text.replace(run, " "), code, question)
        if entry.term not in found and not any(_named(name, rest) for name in entry.names):
            name = min(entry.names, key=len)
            found[entry.term] = Definition(
                name, entry.term, entry.source, entry.title, first_sentence(entry.description), quoted=run
            )
    return list(found.values())


def _coded(entry: Entry) -> bool:
    return any(name.startswith("-") or _CODE.fullmatch(name) or SETTING.fullmatch(name) for name in entry.names)


def _runs(text: str, passages: Sequence[Passage], entries: Sequence[Entry]) -> list[tuple[str, list[Entry]]]:
    """Each quote of `text` (quotes.py: the longest runs a passage holds) of MIN_WORDS words or more that an
    entry's description holds whole, with the entries holding it. A quote that runs on beyond a description
    came from elsewhere: a paragraph that shares a phrase with an entry is no entry's words."""
    descriptions = [flat(entry.description) for entry in entries]
    quoted = mark_quotes([Segment(text)], {p.number: p.text for p in passages})
    runs = []
    for quote in (flat(s.text) for s in quoted if s.passage is not None):
        if len(quote.split()) < MIN_WORDS or len(quote) < MIN_CHARS:
            continue
        holders = [entry for entry, description in zip(entries, descriptions, strict=True) if holds(description, quote)]
        if holders:
            runs.append((quote, holders))
    return runs


def _named(name: str, texts: Sequence[str]) -> bool:
    """Does a word of `texts` name `name`? An option by itself or, a long one, by its bare name ("the
    ignore-pbs option"); a code by a word of 4 letters or more that starts it or that it starts (`drain` names
    DRAINING); a setting by itself in any case, by its words in a row ("pending time" names PendingTime, "pending"
    does not: fresh15's question about a pending job had hidden an answer quoting PendingTime's words as
    EligibleTime's), or by a setting that starts it or that it starts (`AssocGrpCpuLimit` names `AssocGrp`)."""
    if name.startswith("-"):
        forms = {name, name.lstrip("-")} if name.startswith("--") else {name}
        return any(word in forms for text in texts for word in _WORD.findall(text))
    key = name.lower()
    if not _CODE.fullmatch(name):  # a setting: "pending" does not name PendingTime, AssocGrpCpuLimit names AssocGrp
        spaced = " ".join(_CAMEL.findall(name)).lower()
        for text in texts:
            words = _WORD.findall(text)
            if f" {spaced} " in f" {' '.join(words).lower()} " or key in (word.lower() for word in words):
                return True
            for word in (word.lower() for word in words if SETTING.fullmatch(word)):
                if len(word) >= 4 and (word.startswith(key) or key.startswith(word)):
                    return True
        return False
    for text in texts:
        for word in (word.lower() for word in _WORD.findall(text)):
            if word == key or (len(word) >= 4 and (word.startswith(key) or key.startswith(word))):
                return True
    return False
