"""Conversation rules: what retrieval sees for a follow-up, and which earlier turns the prompt keeps.

Retrieval query (documented rule): a question that stands on its own is searched alone;
otherwise the question followed by the previous question of the conversation. A
follow-up such as "and how do I undo that?" names nothing by itself; its antecedent is
almost always in the question before it, while earlier answers are long and would
drown the new question's words. But a follow-up on a new topic searched together with
the old question gets passages on the old topic, and the model then mixes the two.
"Stands on its own" reuses the relevance gate's calibrated test: the question alone
retrieves a passage at or above the gate's similarity threshold (app/copilot/gate.py).
A question below it is searched with the previous one only if it leans on the
conversation (`refers_back`: a pronoun or demonstrative such as "it", "her" or "those", "there"
as a place, an opener such as "and" or "what about", or at most three words). A question
that leans on it and passes the gate alone is searched with the previous one all the same
when that raises the best passage's similarity by `LEANING_GAIN`: "How do I run a command
on all the nodes it gave me?" after a question on salloc reached srun's options alone
(0.60) and salloc's page with the previous question (0.78). Any other question names
its own subject, so it is searched alone and the gate judges it alone: searched with the
previous question, "Who is on call for the Lustre filesystem tonight?" after a question
on pending jobs got the pending-job passages, passed the gate on them and was answered
from them. English cues: a question in another language is searched alone. Without a
calibrated threshold (another embedding model) every follow-up that refers back is
searched with the previous question. Measured on corpora/slurm/followups.jsonl with
`python -m app.bench_retrieval --conversations` (figures in README.md).

History: the most recent turns that fit `history_tokens`, newest first, each kept
whole (question, its passages, answer) while it fits, so the prompt stays an
append-only extension of the previous one and its KV cache is reused; once a turn does
not fit whole, it and every older turn are kept as bare question and answer, and the
oldest are dropped when even that does not fit. A question searched alone after earlier
turns (it stands on its own, or names its own subject) keeps them all bare: its own
sources are then numbered from [1], as in the demonstration. With the earlier passages
kept, they took [1]-[6] and the new ones [7]-[12], and the model's habit of opening with
[1] cited an old, unrelated passage (3 of 8 such questions in corpora/slurm/followups.jsonl).
The turns before such a question stay bare in every later prompt too: kept whole, their
passages and its own stood under the same numbers, and the prompt no longer extended the
one before it, so a follow-up prefilled the whole conversation again (73 s in the chat).
A refused or withheld question has no passages to show it was searched alone, so every turn records
it (`Turn.kept_earlier_bare`): before session 43 a follow-up after a refused new topic put the first
turn's passages back, and nothing but the fixed prefix was shared with the cached judge prompt.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest

from app.copilot.events import Passage, Turn
from app.copilot.gate import best_similarity
from app.copilot.prompting import turn_messages
from retrieval.named_terms import written_names
from retrieval.neighbours import member_ids

# words that point back at an earlier turn; "one" is left out ("one GPU"), "there" counts only as a place
_REFERRING = frozenset([
    "it", "its", "itself", "they", "them", "their", "theirs", "this", "that", "these", "those", "same",
    "he", "him", "his", "himself", "she", "her", "hers", "herself",
])  # fmt: skip
_OPENERS = ("and", "but", "or", "so", "also", "then", "what about", "how about", "what if")
_ELLIPTICAL_WORDS = 3  # "Why?", "Any side effects?": too short to name a subject
# a question that refers back and passes the gate alone is still searched with the previous question when that
# raises the best passage's similarity by this much. The joined query is longer and closer to every page of the
# domain, so small gains are mostly its words, not a better page: chosen on the four older followups*.jsonl
# (session 43; 0.045 before, from the first two), checked on followups_fresh3.jsonl (README, "Follow-ups")
LEANING_GAIN = 0.117
# how many earlier questions a follow-up is searched with at most: the previous one, and the one before it when
# the previous one leaned on the conversation too (each more makes the joined query longer and vaguer)
CHAIN = 2
# what stands next to the existential "there" ("is there", "there's", "there might be"); elsewhere it points back
_EXISTENTIAL = frozenset({
    "is", "are", "was", "were", "be", "been", "being", "s", "isn", "aren", "wasn", "weren", "will", "would",
    "can", "could", "may", "might", "must", "should", "shall", "seem", "seems", "seemed", "appear", "appears",
    "exist", "exists",
})  # fmt: skip


def refers_back(question: str) -> bool:
    """Does `question` lean on the conversation before it (English cues; see the module docstring)?"""
    words = re.findall(r"[a-z]+", question.casefold())
    if len(words) <= _ELLIPTICAL_WORDS:
        return True
    text = " ".join(words)
    if any(text.startswith(opener + " ") for opener in _OPENERS) or not _REFERRING.isdisjoint(words):
        return True
    return any(_points_there(words, i) for i, word in enumerate(words) if word == "there")


def _points_there(words: list[str], i: int) -> bool:
    """Is words[i] ("there") a place ("what does it mean there", "a GPU there too"), not the existential
    "there" of "is there a way" or "there are no jobs", which stands next to a form of "be" or a modal?"""
    before = words[i - 1] if i else ""
    after = words[i + 1] if i + 1 < len(words) else ""
    return before not in _EXISTENTIAL and after not in _EXISTENTIAL


def retrieval_query(question: str, history: Sequence[Turn]) -> str:
    """The query for a question that does not stand on its own: it, then the previous question the
    gate did not refuse ("how do I undo it?" after a refused question goes back to the topic before).
    When that one leaned on the conversation too, the one before it follows (at most `CHAIN` questions
    back): in the chat, "which jobs are still running on it right now?" after "and once it's fixed, how do I
    put it back?" after a question on draining node c042 was searched with the middle question alone, which
    names neither a node nor draining, and got job state codes instead of `squeue`'s node filter."""
    return "\n".join([question, *searched_with(history)])


def your_previous(questions: int) -> str:
    """How the front ends name the earlier questions a follow-up was searched with."""
    return "your previous question" if questions == 1 else f"your {questions} previous questions"


def searched_with(history: Sequence[Turn]) -> list[str]:
    """The earlier questions `retrieval_query` joins to a follow-up, newest first (see there)."""
    earlier = [turn.question for turn in reversed(history) if not turn.refused][:CHAIN]
    return earlier[: next((n for n, asked in enumerate(earlier, 1) if not refers_back(asked)), len(earlier))]


def follow_up_passages(
    question: str,
    history: Sequence[Turn],
    retrieve: Callable[[str], list[Passage]],
    stands_alone: Callable[[list[Passage]], bool],
) -> tuple[list[Passage], str]:
    """Passages for `question` and the query that found them (the rule above)."""
    own = retrieve(question)
    if not history or not refers_back(question):
        return own, question
    query = retrieval_query(question, history)
    if not stands_alone(own) or asks_on_about_a_name(question, query):
        return retrieve(query), query
    joint = retrieve(query)
    alone, together = best_similarity(own), best_similarity(joint)
    if alone is not None and together is not None and together - alone >= LEANING_GAIN:
        return joint, query
    return own, question


def asks_on_about_a_name(question: str, query: str) -> bool:
    """Does a follow-up that writes out no option or setting go on from earlier questions that do? "What does
    the --exclusive option of sbatch do?", then "what about srun?": searched alone, the follow-up got srun's
    pages without its `--exclusive` entry, and the answer's `--exclusive` was flagged as in no source. With
    the earlier question, the entry of the name is looked up on the page the follow-up names (named_terms.py)."""
    return not written_names(question) and bool(written_names(query))


@dataclass(frozen=True)
class KeptHistory:
    messages: list[dict[str, str]]
    passages: list[Passage]  # passages of the turns kept whole (still citable by their number)
    answers: list[str]  # earlier answers the n-gram drafter may copy from, oldest first
    turns: int  # how many turns were kept (whole or bare)


def keep_history(
    turns: Sequence[Turn], budget: int, count_tokens: Callable[[list[dict[str, str]]], int], whole: bool = True
) -> KeptHistory:
    """The turns that fit `budget`, newest first; `whole=False` keeps every one bare (no passages)."""
    kept: list[tuple[Turn, bool]] = []
    used = 0
    below = math.inf  # the lowest passage number of the turns kept whole so far
    bare_from_here = False  # a newer turn's prompt kept this one and all older ones bare
    for turn in reversed(turns):
        numbers = [p.number for p in turn.passages]
        if bare_from_here or (whole and numbers and max(numbers) >= below):
            # a newer turn was searched alone, with this turn bare, and numbered its sources from [1]: keeping
            # this one whole would put two passages under one number and break the append-only prompt
            whole = False
        bare_from_here = bare_from_here or turn.kept_earlier_bare
        if whole:
            cost = count_tokens(turn_messages(turn, with_passages=True))
            if used + cost <= budget:
                kept.append((turn, True))
                used += cost
                below = min([below, *numbers])
                continue
            whole = False
        cost = count_tokens(turn_messages(turn, with_passages=False))
        if used + cost > budget:
            break
        kept.append((turn, False))
        used += cost
    kept.reverse()
    messages = [m for turn, full in kept for m in turn_messages(turn, with_passages=full)]
    passages = [p for turn, full in kept if full for p in turn.passages]
    return KeptHistory(messages, passages, [turn.answer for turn, _ in kept], len(kept))


def number_new_passages(
    candidates: Sequence[Passage],
    already: Sequence[Passage],
    places: int | None = None,
    further: Sequence[Sequence[Passage]] = (),
) -> list[Passage]:
    """Number this turn's passages after the kept ones, skipping any whose chunks the prompt already holds
    (a passage joined from neighbours holds several: retrieval/neighbours.py): the candidates, then the `further`
    rankings' passages taken from each in turn, at most `places` in all.

    A follow-up searched together with the question before it finds much of that question's passages again, and
    the prompt holds them in the earlier turn, so the model read only what was left: "and how do I bump it to the
    front?" after a question on a job pending for priority got one new passage of six. The pipeline gives the
    places of what was found again to the next passages of that search (`Copilot.further_rankings`). Over the six
    Slurm follow-up sets (66 follow-ups, `python -m app.bench_retrieval --conversations`), a gold page is among
    the passages the model reads for 62 against 59, among the new ones for 55 against 49, and no follow-up loses
    one (README, "Follow-ups").
    """
    present = _held_chunks(already)
    fresh: list[Passage] = []

    def take(passage: Passage) -> None:
        chunks = _chunks(passage)
        if not chunks <= present:
            fresh.append(passage)
            present.update(chunks)

    for passage in candidates:
        take(passage)
    # each further ranking without what is taken so far, then one passage from each in turn
    rest = [[p for p in ranking if not _chunks(p) <= present] for ranking in further]
    for row in zip_longest(*rest):
        for passage in row:
            if passage is not None:
                take(passage)
    start = max((p.number for p in already), default=0)
    return [replace(p, number=start + i + 1) for i, p in enumerate(fresh[:places])]


def nearest_passages(
    candidates: Sequence[Passage], already: Sequence[Passage], new: Sequence[Passage]
) -> list[Passage]:
    """What a refusal lists: the search's own passages in its order, each under the number the prompt gives it (one
    a kept turn holds under that turn's number), then the new passages taken further down its ranking
    (`number_new_passages`); as many as the search's own. A follow-up searched with the question before it finds
    that question's passages again, and those it ranked first are the nearest it found, not the further ones."""
    present = _held_chunks(already)
    nearest: list[Passage] = []
    for candidate in candidates:
        chunks = _chunks(candidate)
        pool = already if chunks <= present else new  # held by a kept turn, or numbered as this turn's
        holder = next((p for p in pool if chunks & _chunks(p)), None)
        if holder is not None and holder not in nearest:
            nearest.append(holder)
    nearest += [p for p in new if p not in nearest]
    return nearest[: len(candidates)]


def _held_chunks(passages: Sequence[Passage]) -> set[str]:
    """Every chunk the passages hold (a passage joined from neighbours holds several)."""
    return {chunk for p in passages for chunk in _chunks(p)}


def _chunks(passage: Passage) -> set[str]:
    return member_ids(passage.chunk_id) if passage.chunk_id else {passage.text}
