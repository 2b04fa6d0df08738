"""One question through the copilot pipeline -> one results row.

Retrieval: `Copilot.retrieve(question, 10)` ranks 10 candidates (for hit@k, k = 1..10) and
the first `options.passages` of them are the prompt's passages, given to `Copilot.answer`
as they were ranked (so the answer sees exactly what was scored). Spec-Bench rows bring
their own passages and skip retrieval. With `compare_plain` the same question, with the
same passages, is answered again with speculation "none": decode speedup = speculative
decode tok/s / plain decode tok/s (prefill excluded; the engine reuses the prefilled
prompt for the second answer, so end-to-end times favour whichever runs second), and
`identical` = the two answers' token ids are equal (expected under greedy decoding).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from app.copilot import AnswerOptions, Copilot, Final, Passage, collect
from app.copilot.abstention import abstains
from app.copilot.contacts import misattributed_numbers
from app.eval import metrics
from app.eval.questions import Question
from core.errors import SpecragError


def evaluate_question(
    copilot: Copilot, question: Question, options: AnswerOptions, compare_plain: bool, retrieval_only: bool
) -> dict[str, Any]:
    """The results row of one question; a SpecragError (e.g. context budget) becomes an error row."""
    row: dict[str, Any] = {"id": question.id, "kind": question.kind, "question": question.question}
    row |= {"line": question.line, "unanswerable": question.unanswerable, "status": "ok"}
    try:
        passages, row["retrieval"] = retrieve(copilot, question, options.passages)
        if retrieval_only:
            return row
        final = collect(copilot.answer(question.question, options=options, passages=passages))
        row["answer"] = answer_record(final, question, metrics.option_forms(copilot.tool_pages().options))
        row["abstention"] = abstention_record(final.shown, question)  # what the user saw: a withheld answer abstains
        row["speed"] = speed_record(final.stats)
        if compare_plain:
            plain_options = replace(options, speculation="none")
            plain = collect(copilot.answer(question.question, options=plain_options, passages=passages))
            row["plain"] = plain_record(final, plain, options.temperature)
    except SpecragError as err:
        row |= {"status": "error", "error": str(err)}
    return row


def retrieve(copilot: Copilot, question: Question, k: int) -> tuple[list[Passage], dict[str, Any]]:
    """The prompt's passages and the retrieval record (ranked sources with scores, metrics)."""
    if question.chunks is not None:
        passages = [Passage(i + 1, text, "") for i, text in enumerate(question.chunks)]
        return passages, {"given": True, "sources": [], "metrics": None, "seconds": 0.0}
    started = time.perf_counter()
    candidates = copilot.retrieve(question.question, max(metrics.CANDIDATES, k))
    seconds = time.perf_counter() - started
    gold = question.gold_sources or ()
    sources = [
        {
            "rank": p.number,
            "path": p.source,
            "title": p.title,
            "heading": p.heading,
            "entry": p.entry,
            "score": p.score,
            "chunk_id": p.chunk_id,
            "gold": any(metrics.source_matches(p.source, g) for g in gold),
        }
        for p in candidates
    ]
    scores = metrics.retrieval_metrics([p.source for p in candidates[: metrics.CANDIDATES]], gold)
    record = {"given": False, "sources": sources, "metrics": scores, "seconds": round(seconds, 4)}
    return candidates[:k], record


def content_scores(said: str, question: Question, forms: metrics.OptionForms | None = None) -> dict[str, Any]:
    """How much of the expected answer `said` holds: keyword recall (an option in any of its forms: `forms`,
    metrics.option_forms), exact match, token F1, reference contained."""
    return {
        "keyword_recall": metrics.keyword_recall(said, question.keywords, forms),
        "exact_match": metrics.exact_match(said, question.references),
        "f1": metrics.token_f1(said, question.references),
        "reference_contained": metrics.reference_contained(said, question.references),
    }


def answer_record(final: Final, question: Question, forms: metrics.OptionForms | None = None) -> dict[str, Any]:
    citations = final.citations
    items = final.grounding
    # a gated answer to an answerable question gives none of the answer, only the refusal and its nearest
    # sources' titles, which can hold a keyword ("Jobs and nodes are stuck in COMPLETING state" for a CG
    # question): it is scored as saying nothing. For an unanswerable one the refusal is the answer.
    said = "" if final.gated and not question.unanswerable else final.shown
    return {
        "text": final.answer,
        "withheld": final.withheld,  # not '': the user saw this notice instead of the text, and it is scored
        "finish_reason": final.finish_reason,
        # the relevance gate's reading: best similarity, the judge's verdict when it was asked (gate.py)
        "relevance": final.relevance,
        "passages_in_prompt": len(final.passages),
        **content_scores(said, question, forms),
        "citations": {
            "valid": not citations.invalid,
            "markers": citations.markers,
            "invalid": citations.invalid,
            "cited": citations.valid,
            "copied": {str(n): tokens for n, tokens in citations.copied.items()},
            # where the drafter's copies lie in `text`: rescoring gives the answer its live provenance again
            "copied_spans": [list(span) for span in citations.spans],
            "cited_sources": sorted({p.source for p in final.passages if p.number in citations.valid and p.source}),
        },
        "grounding": {
            "items": len(items),
            "found": sum(item.found for item in items),
            "share": round(sum(item.found for item in items) / len(items), 4) if items else None,
            "ungrounded": [item.text for item in final.ungrounded],
            # the closest line a passage has, for each ungrounded item that has one (app/copilot/nearest.py)
            "nearest": {item.text: [item.nearest, item.nearest_source] for item in final.ungrounded if item.nearest},
            # unfound items' words from the prompt's worked example's command (borrowed.py)
            "from_example": {item.text: list(item.from_example) for item in final.ungrounded if item.from_example},
            "by_kind": grounding_by_kind(items),
            # copied items whose sentence cites a source: how many, and those the cited source lacks (attribution.py)
            "attributed": sum(item.judged for item in items),
            "misattributed": [item.text for item in final.misattributed],
            # prose quotes in sentences that cite a source: how many, and those the cited source lacks
            "quotes_attributed": len(final.quotes),
            "misquoted": [quote.text for quote in final.misquoted],
            # sentences shown citing the source they quote instead of the model's [n] (recite.py); the two
            # counts above are of the shown answer, so they count these as held
            "recited": [[list(r.written), r.now, r.evidence] for r in final.recitations],
            # found commands of a tool's man page copied without the tool (`hold <job_list>`: subcommands.py)
            "without_tool": [[item.text, item.tool] for item in final.without_tool],
            # found items no source writes as such, put together from one source's words (grounding.py)
            "assembled": [[item.text, list(item.built_from)] for item in final.assembled],
            # found items that keep a source's example value where the question named its own (example_values.py)
            "examples": [[item.text, [list(pair) for pair in item.examples]] for item in final.with_examples],
            # sentences taken from the prompt's worked example (its topic or its words), not the sources (borrowed.py)
            "borrowed": [list(pair) for pair in final.borrowed],
            # of those, the ones copying the example's words, left out of the shown answer (borrowed.py)
            "left_out": [list(pair) for pair in final.left_out],
            "said_before": list(final.said_before),
        },
        # what the passages say the options of the answer's code do, as the front ends show it (definitions.py)
        "definitions": [[d.name, d.source, d.text] for d in final.definitions if not d.quoted and not d.value],
        # the row or item of a source's thresholds each value of the question falls in (thresholds.py)
        "thresholds": [[d.value, d.source, d.text] for d in final.definitions if d.value],
        # words the answer quotes from an entry it does not name: its neighbour's description (neighbour_quotes.py)
        "neighbour_quotes": [[d.name, d.source, d.quoted] for d in final.definitions if d.quoted and not d.said_of],
        # a source's sentence told of another setting: [the answer's, the source's, source, words] (swapped.py)
        "swapped": [[d.said_of, d.term, d.source, d.quoted] for d in final.definitions if d.said_of],
        # a contact number the sources give for someone else, which withholds the answer (contacts.py):
        # [the answer's person, the source's, source, number]
        "misattributed_numbers": [
            [d.said_of, d.term, d.source, d.quoted]
            for d in misattributed_numbers(final.answer, final.passages, final.question)
        ],
        # sentences joining quotes of two different items of one source (splices.py)
        "spliced": [[s.source, s.first, s.second] for s in final.spliced],
        # two quantities compared the wrong way round: [first, "above" or "below", second] (comparisons.py)
        "miscompared": [[m.first, m.relation, m.second] for m in final.miscompared],
        "example_facts": [[f.own, list(f.theirs), f.source] for f in final.example_facts],
        "cut_code": [final.cut_code.written, final.cut_code.source] if final.cut_code else None,
        "misplaced_settings": [[m.key, m.file, m.source] for m in final.misplaced],
        # [tool, option, value, source]: a value its option's entry does not list (option_values.py)
        "unlisted_values": [[u.tool, u.option, u.value, u.source] for u in final.unlisted],
    }


def grounding_by_kind(items: list) -> dict[str, dict[str, int]]:
    """{kind: {"items": n, "found": m, "adapted": a}}: commands and options apart from specifics such as
    names and numbers; `adapted` of the found ones carry the user's own values (grounding.py)."""
    kinds: dict[str, dict[str, int]] = {}
    for item in items:
        counts = kinds.setdefault(item.kind, {"items": 0, "found": 0, "adapted": 0})
        counts["items"] += 1
        counts["found"] += item.found
        counts["adapted"] += item.adapted
    return kinds


def abstention_record(answer: str, question: Question) -> dict[str, Any] | None:
    """Correct when an unanswerable question abstains, or an answerable one does not; None if unknown."""
    abstained = abstains(answer)
    if question.gold_sources is None and question.chunks is None:
        return {"expected": None, "abstained": abstained, "correct": None}
    expected = question.unanswerable
    return {"expected": expected, "abstained": abstained, "correct": abstained == expected}


def speed_record(stats: dict[str, Any]) -> dict[str, Any]:
    drafted, accepted = stats.get("drafted", {}), stats.get("accepted", {})
    return {
        "speculation": stats.get("speculation"),
        "ttft_s": stats.get("time_to_first_token_s"),
        "total_s": stats.get("elapsed_s"),
        "prefill_s": stats.get("prefill_s"),
        "decode_s": stats.get("decode_s"),
        "new_tokens": stats.get("new_tokens"),
        "decode_tokens_per_s": stats.get("decode_tokens_per_s"),
        "tokens_per_pass": stats.get("tokens_per_pass"),
        "target_passes": stats.get("target_passes"),
        "acceptance": {d: round(accepted.get(d, 0) / n, 4) for d, n in drafted.items() if n},
        "drafted": drafted,
        "accepted": accepted,
        "copied_share": stats.get("copied_share"),
        "code_steered": stats.get("code_steered"),  # rows where decoding kept code to the sources
        "code_left_alone": stats.get("code_left_alone"),  # ... and where no likely token could
        "code_finished": stats.get("code_finished"),  # ... where a begun source word was finished instead
    }


def plain_record(final: Final, plain: Final, temperature: float) -> dict[str, Any]:
    spec_tps, plain_tps = final.stats.get("decode_tokens_per_s") or 0.0, plain.stats.get("decode_tokens_per_s") or 0.0
    spec_total, plain_total = final.stats.get("elapsed_s") or 0.0, plain.stats.get("elapsed_s") or 0.0
    return {
        "answer": plain.answer,
        "speed": speed_record(plain.stats),
        "speedup": round(spec_tps / plain_tps, 4) if plain_tps > 0 and spec_tps > 0 else None,
        "speedup_total": round(plain_total / spec_total, 4) if spec_total > 0 else None,
        "identical": list(final.output_ids) == list(plain.output_ids),
        "greedy": temperature == 0,
    }
