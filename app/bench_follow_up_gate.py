"""The relevance gate on follow-ups, judge included, as the chat decides them.

    python -m app.bench_follow_up_gate --index DIR CONVERSATIONS.jsonl [MORE.jsonl ...] [--out FILE.json]

`python -m app.bench_retrieval --conversations` counts the follow-ups the cosine gate refuses; below its
threshold the copilot first asks the target (gate.py's judge), and in a conversation the judge prompt holds
the earlier turn with its real answer. So for each row (`previous`, `question`, `kind`: "follow-up",
"new topic" or "unanswerable") this searches the question as the copilot would after `previous`; where
cosine alone refuses, it answers `previous` through the pipeline, then asks the question in that
conversation and records the judge's log-odds and the gate's verdict (generation stops after one token).
An unanswerable question the gate lets through is answered in full in its conversation, and counts as
abstained when the answer says the sources do not cover it or is withheld (as `specrag eval` counts).
Reports, per kind, how many cosine refuses, how many the judge was asked about, how many the gate
refuses, and how many unanswerable ones end abstained. With --answer-all every answerable follow-up is
answered in full in its conversation too, and the report adds, per kind: how many answers cite a passage from
a gold page (`gold` in the row), the ungrounded items in them, and the mean time to the first token.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from app.cli_options import add_copilot_args, copilot_options
from app.copilot import Copilot, Turn, collect, gate
from app.copilot.abstention import abstains
from app.copilot.events import Final
from app.eval.metrics import source_matches
from app.eval.questions import RowError, json_object, read_lines
from core.atomic import write_atomic
from core.errors import SpecragError
from core.output_paths import output_file

UNANSWERABLE = "unanswerable"  # the kind of a row whose question the sources cannot answer


def load_conversations(paths: list[Path]) -> list[dict]:
    """The rows of the conversation files, read as the eval reads questions; a file that cannot be read, a line
    that is not a JSON object or a row without its fields is a SpecragError naming the line."""
    rows = []
    for path in paths:
        for n, line in enumerate(read_lines(path), 1):
            if not line.strip():
                continue
            try:
                row = json_object(line)
            except RowError as err:
                raise SpecragError(f"{path}:{n}: {err}; one JSON object per line") from err
            missing = {"id", "kind", "previous", "question"} - row.keys()
            if missing:
                raise SpecragError(f"{path}:{n}: a conversation needs {', '.join(sorted(missing))}")
            rows.append(row)
    return rows


def decide(copilot: Copilot, row: dict, options, judge_all: bool = False, answer_all: bool = False) -> dict:
    """The gate's verdict on `row`'s question after its previous one, with the judge where cosine refuses;
    `judge_all` also records the judge's score where cosine passes (`judged_all`), for a follow-up searched
    together with the previous question, whose similarity that question's words may carry; `answer_all` answers
    every question in full and records what its answer cites (`answered`)."""
    target = copilot.loaded.target if copilot.loaded else None
    one_token = replace(options, max_new_tokens=1)  # the verdict comes before the answer's first token
    probe = [Turn(row["previous"], "", ())]  # retrieval does not read the earlier answer
    passages, query = copilot.retrieve_for(row["question"], probe, options.passages)
    relevance = gate.assess(passages, copilot.embedding_model, target, row["question"])  # as the chat assesses it
    result = {
        "id": row["id"],
        "kind": row["kind"],
        "question": row["question"],
        "with_previous": query != row["question"],
        "similarity": relevance.similarity,
        "cosine_refused": not relevance.close,
        "judged": None,
        "refused": not relevance.covered,
    }
    unanswerable = row["kind"] == UNANSWERABLE
    score_all = judge_all and result["with_previous"]
    if not relevance.needs_judge and not (unanswerable and relevance.covered) and not score_all and not answer_all:
        return result
    first = collect(copilot.answer(row["previous"], [], options))
    # an unanswerable question the gate lets through is answered in full: do the answer-side rules abstain?
    final = collect(copilot.answer(row["question"], [first.turn], options if unanswerable or answer_all else one_token))
    reading = final.relevance or {}
    result |= {"judged": reading.get("judged"), "refused": final.gated, "previous_refused": first.gated}
    if answer_all and not unanswerable:
        result["answered"] = answered(final, row.get("gold") or [])
    if unanswerable:
        result |= {"abstained": final.gated or bool(final.withheld) or abstains(final.answer), "answer": final.answer}
    if score_all:
        # after the verdict, so that it came from a cache this never touched; the judge prompt is then computed
        # from where the follow-up's prompt began, as the pipeline computes it (Copilot._in_fixed_pieces)
        judged = result["judged"]
        if judged is None:
            history, k = [first.turn], options.passages
            further = copilot.further_rankings(row["question"], query, history, k)
            judged = round(copilot.judge(row["question"], passages, options, history, places=k, further=further), 4)
        result["judged_all"] = judged
    return result


def answered(final: Final, gold: list[str]) -> dict:
    """What an answer in full shows: whether it cites a passage from a gold page, its ungrounded items, its
    new passages and its first token."""
    cited = [source["path"] for source in final.sources if source["cited"]]
    return {
        "cites_gold": not final.gated and any(source_matches(path, page) for path in cited for page in gold),
        "ungrounded": len(final.ungrounded),
        "new_passages": len(final.turn.passages),
        "first_token_s": final.stats.get("time_to_first_token_s"),
        "answer": final.shown,
    }


def summarise(results: list[dict]) -> dict:
    kinds: dict[str, dict] = {}
    for r in results:
        k = kinds.setdefault(r["kind"], {"questions": 0, "cosine_refused": 0, "judged": 0, "refused": 0})
        k["questions"] += 1
        k["cosine_refused"] += r["cosine_refused"]
        k["judged"] += r["judged"] is not None
        k["refused"] += r["refused"]
        if r["kind"] == UNANSWERABLE:
            k["abstained"] = k.get("abstained", 0) + (r["refused"] or r.get("abstained", False))
        if "answered" in r:
            a = r["answered"]
            k["cites_gold"] = k.get("cites_gold", 0) + a["cites_gold"]
            k["ungrounded"] = k.get("ungrounded", 0) + a["ungrounded"]
            k.setdefault("first_token_s", []).append(a["first_token_s"] or 0.0)
    for k in kinds.values():
        if "first_token_s" in k:
            k["first_token_s"] = round(sum(k["first_token_s"]) / len(k["first_token_s"]), 2)
    return kinds


def table(kinds: dict) -> str:
    lines = [
        "| kind | questions | refused by cosine | judged | refused by the gate | abstained in the end |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, k in kinds.items():
        lines.append(
            f"| {kind} | {k['questions']} | {k['cosine_refused']} | {k['judged']} | {k['refused']} | "
            f"{k.get('abstained', '-')} |"
        )
    for kind, k in kinds.items():
        if "cites_gold" in k:
            lines.append(
                f"{kind}, answered in full: {k['cites_gold']} cite a gold page, {k['ungrounded']} ungrounded items, "
                f"first token {k['first_token_s']} s on average"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.bench_follow_up_gate", description=__doc__.split("\n")[0])
    parser.add_argument("conversations", nargs="+", type=Path, help="JSONL rows: id, kind, previous, question")
    parser.add_argument("--out", type=Path, help="write every row's verdict and the summary as JSON here")
    parser.add_argument(
        "--judge-all",
        action="store_true",
        help="also ask the judge about every follow-up searched with the previous question (one more answer each)",
    )
    parser.add_argument(
        "--answer-all",
        action="store_true",
        help="answer every question in full in its conversation: answers citing a gold page, ungrounded items, "
        "first token",
    )
    add_copilot_args(parser)
    args = parser.parse_args(argv)
    if args.out:
        output_file(args.out)  # before the models load
    rows = load_conversations(args.conversations)
    options = copilot_options(args)
    copilot = Copilot.load(options, open_index_first=True)
    results = []
    for n, row in enumerate(rows, 1):
        results.append(decide(copilot, row, options.answer, args.judge_all, args.answer_all))
        r = results[-1]
        judged = f" judge {r['judged']:+.2f}" if r["judged"] is not None else ""
        judged += f" judge-all {r['judged_all']:+.2f}" if r.get("judged_all") is not None else ""
        verdict = "refused" if r["refused"] else "answered"
        print(f"{n}/{len(rows)} {r['kind']:12} {r['similarity'] or 0:.3f}{judged} {verdict}: {r['question'][:70]}",
              file=sys.stderr)  # fmt: skip
    kinds = summarise(results)
    if args.out:
        write_atomic(args.out, json.dumps({"kinds": kinds, "rows": results}, indent=1) + "\n")
    print(table(kinds))
    return 0


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.bench_follow_up_gate", main))
