"""Calibrate the relevance gate's threshold on a development split; report it on the held-out split.

    python -m app.copilot.gate_calibration --index DIR QUESTIONS.jsonl [MORE.jsonl ...]

A row is answerable when its gold sources (`gold_sources`, or the older `gold`) are non-empty,
unanswerable when they are an empty list. Rows are split by a hash of their id (even -> dev,
odd -> held-out), so the split does not depend on file order. On dev, the threshold is the
one that maximises balanced accuracy (mean of the refused share of unanswerable questions and
the answered share of answerable ones), ties broken towards the lower threshold (refusing
less). The held-out figures are what a user should expect on new questions.

With `--judge` the models load too, the judge (gate.py) is asked about every question below the
cosine threshold, and its log-odds threshold is calibrated on the same dev split for the rule
"answer when cosine passes or the judge says yes". Thresholds between two neighbouring dev scores
give the same dev figures, so the one chosen is the middle of the best gap (the widest margin on
both sides); ties between gaps go to the higher threshold: the judge only ever lets questions
through, so it lets fewer through when unsure. Its scores belong to the target model it ran on.

With `--veto LOG_ODDS` as well, the judge is asked about the questions cosine lets through too, and both
splits are reported with the gate's veto at that log-odds (gate.JUDGE_VETOES: 0 for the default target).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path

from app.copilot.gate import Relevance, applied_veto, best_similarity


def load_rows(paths: list[Path]) -> list[dict]:
    rows = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                gold = row.get("gold_sources", row.get("gold"))
                if gold is not None:
                    rows.append({"id": str(row["id"]), "question": row["question"], "answerable": bool(gold)})
    return rows


def split_of(row_id: str) -> str:
    return "dev" if hashlib.sha1(row_id.encode()).digest()[0] % 2 == 0 else "held-out"


def refused(row: dict, threshold: float, judge_threshold: float | None = None, veto: float | None = None) -> bool:
    """Whether the gate (its own rule: gate.Relevance) refuses this row at these thresholds."""
    veto = applied_veto(veto, row.get("question", ""))  # as gate.assess applies it
    return not Relevance(row["similarity"], threshold, judge_threshold, row.get("judged"), veto).covered


def rates(rows: list[dict], threshold: float, judge_threshold: float | None = None, veto: float | None = None) -> dict:
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    refused_bad = sum(refused(r, threshold, judge_threshold, veto) for r in unanswerable)
    refused_good = sum(refused(r, threshold, judge_threshold, veto) for r in answerable)
    return {
        "threshold": round(threshold, 3),
        **({"judge_threshold": round(judge_threshold, 3)} if judge_threshold is not None else {}),
        **({"veto": veto} if veto is not None else {}),
        "unanswerable": len(unanswerable),
        "unanswerable_refused": round(refused_bad / len(unanswerable), 3) if unanswerable else None,
        "answerable": len(answerable),
        "answerable_refused": round(refused_good / len(answerable), 3) if answerable else None,
    }


def balanced_accuracy(rows: list[dict], threshold: float, judge_threshold: float | None = None) -> float:
    r = rates(rows, threshold, judge_threshold)
    return ((r["unanswerable_refused"] or 0.0) + 1.0 - (r["answerable_refused"] or 0.0)) / 2


def calibrate(dev: list[dict]) -> float:
    candidates = sorted({round(r["similarity"] + 1e-4, 4) for r in dev} | {0.0})
    return max(candidates, key=lambda t: (balanced_accuracy(dev, t), -t))


def calibrate_judge(dev: list[dict], threshold: float) -> float | None:
    """The judge's threshold on dev, given the cosine one: the middle of the best gap between judged scores
    (None when no question below the cosine threshold was judged)."""
    scores = sorted({r["judged"] for r in dev if r["similarity"] < threshold and r.get("judged") is not None})
    if not scores:
        return None
    # a threshold in each gap, and one beyond either end (letting everything through / nothing)
    edges = [scores[0] - 1.0, *scores, scores[-1] + 1.0]
    candidates = [(a + b) / 2 for a, b in itertools.pairwise(edges)]
    return max(candidates, key=lambda t: (balanced_accuracy(dev, threshold, t), t))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("questions", nargs="+", type=Path)
    parser.add_argument("--index", type=Path, default=None)
    parser.add_argument("-k", type=int, default=6)
    parser.add_argument(
        "--threshold",
        type=float,
        help="report both splits at this threshold instead of calibrating one on the dev split "
        "(the gate's own, to see how it treats new questions)",
    )
    parser.add_argument(
        "--judge",
        action="store_true",
        help="also load the models and calibrate the judge the gate asks below its threshold (minutes)",
    )
    parser.add_argument("--target", default=None, help="the target model to judge with (default: the default one)")
    parser.add_argument(
        "--judge-threshold", type=float, help="report both splits at this judge threshold instead of calibrating one"
    )
    parser.add_argument(
        "--veto",
        type=float,
        metavar="LOG_ODDS",
        help="with --judge: also judge the questions cosine lets through, and refuse those the judge scores below "
        "this (the gate's veto; 0 for the default target)",
    )
    args = parser.parse_args(argv)
    if args.veto is not None and not args.judge:
        parser.error("--veto needs --judge: the veto is the judge's")
    from app.copilot import Copilot, CopilotOptions, ModelOptions

    options = CopilotOptions(index_dir=args.index, park_positions=0)  # every question stands alone: nothing to park
    if args.target:
        options = replace(options, models=ModelOptions(target=args.target))
    copilot = Copilot.retrieval_only(options)
    rows = load_rows(args.questions)
    for row in rows:
        row["passages"] = copilot.retrieve(row["question"], args.k)
        row["similarity"] = best_similarity(row["passages"]) or 0.0
        row["split"] = split_of(row["id"])
    dev = [r for r in rows if r["split"] == "dev"]
    threshold = calibrate(dev) if args.threshold is None else args.threshold
    judge_threshold = None
    if args.judge:
        from app.copilot import loading

        judging = Copilot(loading.load_engine(replace(options.models, draft=None)), options, copilot.retriever())
        below = [r for r in rows if r["similarity"] < threshold or args.veto is not None]
        for n, row in enumerate(below, 1):
            row["judged"] = round(judging.judge(row["question"], row["passages"]), 4)
            print(f"judged {n}/{len(below)}: {row['judged']:+.2f} {row['question'][:70]}", file=sys.stderr)
        judge_threshold = calibrate_judge(dev, threshold) if args.judge_threshold is None else args.judge_threshold
    report = {
        "embedding_model": copilot.embedding_model,
        **({"target": options.models.target} if args.judge else {}),
        "dev": rates(dev, threshold, judge_threshold, args.veto),
        "held_out": rates([r for r in rows if r["split"] == "held-out"], threshold, judge_threshold, args.veto),
    }
    print(json.dumps(report, indent=1))
    for row in sorted(rows, key=lambda r: r["similarity"]):
        judged = f" judge {row['judged']:+.2f}" if row.get("judged") is not None else ""
        kind = "A" if row["answerable"] else "U"
        print(f"{row['similarity']:.3f}{judged} {kind} {row['split']:8} {row['question'][:90]}")
    return 0


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.copilot.gate_calibration", main))
