"""The relevance gate: before generating, decide whether the passages can answer the question.

Signal: the best dense cosine similarity between the question and a retrieved passage
(all-MiniLM-L6-v2 vectors are normalised, so it is comparable across questions and
corpora, unlike the rank-based fused score). Below the threshold the copilot, in the
default `refuse` mode, says the sources do not cover the question and lists the nearest
ones instead of letting the model answer from general knowledge; `warn` answers with a
warning; `off` never gates. Passages without a similarity (--context-file, Spec-Bench)
are never gated; retrieved ones are, whoever retrieved them (the eval retrieves itself).

A threshold holds only for the embedding model it was calibrated with: THRESHOLDS maps
model ids to thresholds, and an index built with another model is not gated (the
reading says `calibrated: false`). The thresholds were calibrated on a development split
of our own questions (`python -m app.copilot.gate_calibration`; figures in README.md).

The judge, a second look for questions below the threshold. Cosine misses answerable questions worded
unlike the docs ("stuck in CG state"), so before refusing one, the copilot asks the target model itself,
with the prompt the answer would get but closing with JUDGE_QUESTION, whether the answer is in the
sources; its log-odds of "Yes" over "No" as the first token at or above JUDGE_THRESHOLDS[target] lets the
question through. The judge prompt shares every token up to the question with the answer's, so a rescued
answer prefills only its closing line; a refused question costs one prefill of its prompt (~5 s on two
CPU cores), where the cosine gate alone ran no model.
Only the target it was calibrated with gets a judge (`gate_calibration --judge`); another target is
gated by cosine alone.

The judge's veto (session 49). Cosine also lets through questions the sources do not answer, when the
passages are on the question's topic: the on-call administrator's pager number over Slurm's admin pages, the
partition a group should use "here", the ticket queue for a database outage. So the judge is asked about every
question, and one that passes cosine is refused when the model says No at least as likely as Yes (log-odds
below JUDGE_VETOES[target], 0: the model's own boundary, not a value fitted to our questions). Over every Slurm
set (README, "The relevance gate") the veto refused 5 of the 13 unanswerable questions cosine let through, and 9
of 190 answerable ones, each of which had been answered wrongly when it had an eval answer on record. The judge
prompt shares every token up to its closing line with the answer's, so asking it costs the answer one more
short pass (its closing line), not a second prefill of the passages.
A question that itself asks yes or no is never vetoed (`asks_yes_or_no`): asked whether the answer to "can i just
bump it [the user's quota]?" is in the sources, the model answers the question's own No (log-odds -0.26), and
on the runbooks the veto refused four such questions, one of them answered right before (session 49).

A question whose value falls in a passage's thresholds (thresholds.py: a row or item of the same unit whose
words the question shares) is close whatever its cosine: the sources state where that value lies, so they
speak of what it measures. Asked in the chat "the hall B inlet temperature is 31C, what do I do?" (session 58),
the cosine was 0.41, the judge 0.29 below its 0.62, and the operator was told the sources do not cover an
inlet temperature that the power runbook's first table gives a WARNING row for. The veto still applies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.copilot.events import Passage, Segment
from app.copilot.quotes import mark_quotes
from app.copilot.source_paths import short_paths
from app.copilot.thresholds import thresholds

GATE_MODES = ("off", "warn", "refuse")
THRESHOLDS = {"sentence-transformers/all-MiniLM-L6-v2": 0.49}  # dev split of corpora/slurm questions: see README
# the judge's log-odds threshold per target model (as named in ModelOptions.target): see README
JUDGE_THRESHOLDS = {"default-target": 0.618}
# below this log-odds the judge refuses a question that cosine let through (see above); only with a judge
JUDGE_VETOES = {"default-target": 0.0}


@dataclass(frozen=True)
class Relevance:
    similarity: float | None  # best dense cosine among the passages; None when none has one
    threshold: float | None  # None: no threshold for this embedding model, so no judgement
    judge_threshold: float | None = None  # None: no judge for this target model
    judged: float | None = None  # the judge's log-odds of Yes over No; None while it has not been asked
    veto: float | None = None  # None: the judge is not asked about questions cosine lets through
    banded: bool = False  # a value of the question falls in a passage's thresholds (thresholds.py)

    @property
    def close(self) -> bool:
        """A passage is as close to the question as the threshold asks, or gives the band its value falls in
        (or nothing is gated)."""
        if self.threshold is None or self.banded:
            return True
        return self.similarity is not None and self.similarity >= self.threshold

    @property
    def needs_judge(self) -> bool:
        """A judge for this target that has not been asked yet, and a question below the threshold or a veto."""
        return self.judge_threshold is not None and self.judged is None and (not self.close or self.veto is not None)

    @property
    def vetoed(self) -> bool:
        """Close enough by cosine, but the judge found the answer in none of the passages."""
        return self.close and self.judged is not None and self.veto is not None and self.judged < self.veto

    @property
    def covered(self) -> bool:
        if self.close:
            return not self.vetoed
        return self.judged is not None and self.judge_threshold is not None and self.judged >= self.judge_threshold

    def with_judgement(self, log_odds: float) -> Relevance:
        return replace(self, judged=round(log_odds, 4))

    def to_dict(self) -> dict:
        return {
            "similarity": self.similarity,
            "threshold": self.threshold,
            "calibrated": self.threshold is not None,
            "judged": self.judged,
            "judge_threshold": self.judge_threshold,
            "veto": self.veto,
            "banded": self.banded,
            "covered": self.covered,
        }


def best_similarity(passages: Sequence[Passage]) -> float | None:
    """The gate's signal: the best dense cosine among the passages (None when none has one)."""
    return max((p.similarity for p in passages if p.similarity is not None), default=None)


def assess(
    passages: Sequence[Passage], embedding_model: str | None, target: str | None = None, question: str = ""
) -> Relevance:
    """The gate's reading before the judge is asked; the veto only for a `question` that does not ask yes or no."""
    threshold = THRESHOLDS.get(embedding_model or "")
    judge = JUDGE_THRESHOLDS.get(target or "") if threshold is not None else None
    veto = applied_veto(JUDGE_VETOES.get(target or ""), question) if judge is not None else None
    banded = threshold is not None and bool(thresholds(question, passages))
    return Relevance(best_similarity(passages), threshold, judge, veto=veto, banded=banded)


def applied_veto(veto: float | None, question: str) -> float | None:
    """`veto` as it applies to `question`: none for a question that itself asks yes or no (module docstring)."""
    return None if veto is None or asks_yes_or_no(question) else veto


# the words a yes-or-no question opens with: auxiliaries and modals, and "ok"/"okay" ("- ok to do that?")
_YES_OR_NO = frozenset({
    "am", "is", "are", "was", "were", "do", "does", "did", "have", "has", "had", "can", "could", "may", "might",
    "shall", "should", "will", "would", "must", "isn't", "aren't", "don't", "doesn't", "didn't", "can't",
    "couldn't", "shouldn't", "won't", "wouldn't", "ok", "okay",
})  # fmt: skip
_CONJUNCTIONS = frozenset({"and", "but", "or", "so", "then", "also"})
# where a clause ends: a sentence's end, a comma, semicolon or colon, or a dash between spaces
_CLAUSE_END = re.compile(r"[.!?;:,]\s|\s[-\u2013\u2014]+\s")


def asks_yes_or_no(question: str) -> bool:
    """Does the clause that carries the question's (last) question mark open like a yes-or-no question?

    "Am I allowed to just close it?", "can i just bump it?", "- ok to do that?" do; "Which partition should I
    point them at?", "Is X set, and how long ...?" (its last clause asks how long) do not. A question with no
    question mark is read by its last clause."""
    text = question.strip()
    mark = text.rfind("?")
    if mark >= 0:
        text = text[:mark]
    clause = _CLAUSE_END.split(text)[-1]
    words = re.findall(r"[a-z']+", clause.casefold())
    while words and words[0] in _CONJUNCTIONS:
        words.pop(0)
    return bool(words) and words[0] in _YES_OR_NO


def judge_tokens(tokenizer: Any) -> tuple[int, int] | None:
    """The token ids of "Yes" and "No" opening an answer; None when the tokenizer cannot tell them apart."""
    yes, no = (tokenizer(word, add_special_tokens=False)["input_ids"] for word in ("Yes", "No"))
    return (yes[0], no[0]) if yes and no and yes[0] != no[0] else None


def _match(reading: dict) -> str:
    score, threshold = _apart(reading["similarity"], reading["threshold"])
    near = Relevance(reading["similarity"], reading["threshold"]).close
    close = near or bool(reading.get("banded"))
    side = "above" if near else "below"
    match = f"the closest source matches the question at {score}, {side} the relevance gate's {threshold}"
    if close and not near:
        match += "; a source gives the band your value falls in"
    bar = reading.get("veto") if close else reading.get("judge_threshold")
    if reading.get("judged") is None or bar is None:
        return match
    judged, bar = _apart(reading["judged"], bar)
    joint = "but" if close else "and"
    return f"{match}, {joint} asked, the model did not find the answer in them (log-odds {judged}, below {bar})"


def _apart(value: float, threshold: float) -> tuple[str, str]:
    """`value` and `threshold` with two decimals, or as many more (up to four) as they need to read apart: a
    judge at 0.6152 is "0.615, below 0.618", not "0.62, below 0.62" (the web chat showed that, session 45)."""
    for places in (2, 3, 4):
        shown = f"{value:.{places}f}", f"{threshold:.{places}f}"
        if shown[0] != shown[1]:
            break
    return shown


def why_refused(reading: dict | None) -> str:
    """The stats line of a gated answer: the best source's similarity against the threshold, and the
    judge's verdict when it was asked (Relevance.to_dict)."""
    if not reading or reading.get("similarity") is None or reading.get("threshold") is None:
        return "not answered: the relevance gate found no source close enough"
    return f"not answered: {_match(reading)}"


def weak_match_warning(reading: dict | None, gated: bool = False) -> str:
    """What `--gate warn` shows with an answer the gate would have refused ("" when it would not have)."""
    if gated or not reading or reading.get("covered", True) or reading.get("similarity") is None:
        return ""
    return f"the sources may not cover this question ({_match(reading)}): check the answer against them"


REFUSAL = "The sources do not cover this question, so I will not guess an answer."
_PASTED = re.compile(r"\w[:_=/<>\[\]{}]|\d|[_=/<>\[\]{}]\w")  # log and code marks inside or next to a word


def refusal_text(passages: Sequence[Passage], question: str = "") -> str:
    """What the copilot says instead of answering: plain, with the nearest sources to look at, each with the
    log or code line of the question it holds verbatim, if any (`pasted_quotes`)."""
    lines = [REFUSAL]
    if passages:
        nearest = _distinct_places(passages, 3)
        quoted = pasted_quotes(question, nearest)
        lines.append("The nearest sources I found are:")
        lines += [
            f"- [{p.number}] {' › '.join(p.label_parts(p.source))} ({path})"
            + (f", which has what you pasted: `{quoted[p.number]}`" if p.number in quoted else "")
            for p, path in zip(nearest, short_paths([p.source for p in nearest]), strict=True)
        ]
    return "\n".join(lines)


def _distinct_places(passages: Sequence[Passage], n: int) -> list[Passage]:
    """The first `n` passages from different places: two chunks of one section (topology.conf › DESCRIPTION, [1]
    and [2]) made two identical lines, and the front ends show a repeated line once, so only two sources stood."""
    seen: set[tuple[str, ...]] = set()
    places = []
    for passage in passages:
        place = (passage.source, *passage.label_parts(passage.source))
        if place not in seen:
            seen.add(place)
            places.append(passage)
            if len(places) == n:
                break
    return places


def pasted_quotes(question: str, passages: Sequence[Passage]) -> dict[int, str]:
    """{passage number: the longest run of the question it holds verbatim} for runs that read like a pasted log or
    code line (a word with a digit or one of `:_=/<>[]{}`), not the asking prose. An operator pasted eight
    slurmctld.log lines; the gate refused the question, and the first source it listed, an FAQ entry, quotes
    "error: Munge decode failed: Expired credential" and explains it (session 50): saying so sends them there."""
    found: dict[int, str] = {}
    for segment in mark_quotes([Segment(question)], {p.number: p.text for p in passages}):
        run = segment.text.strip()
        if segment.passage is not None and _PASTED.search(run) and len(run) > len(found.get(segment.passage, "")):
            found[segment.passage] = run.replace("`", "'")  # shown as inline code
    return found
