"""Calibrate the relevance gate's threshold on a development split; report it on the held-out split.

    python -m app.copilot.gate_calibration --index DIR QUESTIONS.jsonl [MORE.jsonl ...]

A row is answerable when its gold sources (`gold_sources`, or the older `gold`) are non-empty,
unanswerable when they are an empty list. Rows are split by a hash of their id (even -> dev,
odd -> held-out), so the split does not depend on file order. On dev, the threshold is the
one that maximises balanced accuracy (mean of the refused share of unanswerable questions and
the answered share of answerable ones), ties broken towards the lower threshold (refusing
less). The held-out figures are what a user should expect on new questions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from app.copilot.gate import best_similarity


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


def rates(rows: list[dict], threshold: float) -> dict:
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    refused_bad = sum(r["similarity"] < threshold for r in unanswerable)
    refused_good = sum(r["similarity"] < threshold for r in answerable)
    return {
        "threshold": round(threshold, 3),
        "unanswerable": len(unanswerable),
        "unanswerable_refused": round(refused_bad / len(unanswerable), 3) if unanswerable else None,
        "answerable": len(answerable),
        "answerable_refused": round(refused_good / len(answerable), 3) if answerable else None,
    }


def calibrate(dev: list[dict]) -> float:
    candidates = sorted({round(r["similarity"] + 1e-4, 4) for r in dev} | {0.0})

    def balanced(threshold: float) -> float:
        r = rates(dev, threshold)
        return ((r["unanswerable_refused"] or 0.0) + 1.0 - (r["answerable_refused"] or 0.0)) / 2

    return max(candidates, key=lambda t: (balanced(t), -t))


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
    args = parser.parse_args(argv)
    from app.copilot import Copilot, CopilotOptions

    copilot = Copilot.retrieval_only(CopilotOptions(index_dir=args.index))
    rows = load_rows(args.questions)
    for row in rows:
        row["similarity"] = best_similarity(copilot.retrieve(row["question"], args.k)) or 0.0
        row["split"] = split_of(row["id"])
    dev = [r for r in rows if r["split"] == "dev"]
    threshold = calibrate(dev) if args.threshold is None else args.threshold
    report = {
        "embedding_model": copilot.embedding_model,
        "dev": rates(dev, threshold),
        "held_out": rates([r for r in rows if r["split"] == "held-out"], threshold),
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=1))
    for row in sorted(rows, key=lambda r: r["similarity"]):
        print(f"{row['similarity']:.3f} {'A' if row['answerable'] else 'U'} {row['split']:8} {row['question'][:90]}")
    return 0


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.copilot.gate_calibration", main))
