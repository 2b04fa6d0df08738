"""`specrag eval QUESTIONS.jsonl --out DIR`: batch evaluation of the copilot; a front end of the pipeline.

Reads the questions (skipping malformed rows with a message), evaluates each through
`Copilot` (app/eval/runner.py), appends its row to DIR/results.jsonl as soon as it is done,
and finally writes DIR/report.md, DIR/report.json and DIR/plots/. `--resume` continues a
run: finished ids are skipped, never written twice. A progress bar with an ETA goes to
stderr; one summary line goes to stdout at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.cli_options import add_copilot_args, copilot_options
from app.copilot import Copilot, CopilotOptions
from app.eval.questions import ignored_fields, read_questions
from app.eval.report import summary_line, write_report
from app.eval.results import RESULTS_NAME, ResultsFile
from app.eval.runner import evaluate_question
from core.atomic import write_atomic
from core.errors import SpecragError
from core.output_paths import output_dir


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate retrieval, answers, abstention and speed on a question set",
        description="Answer every question of a JSONL question set through the copilot and score retrieval (hit@k, "
        "recall@k, MRR, nDCG), answers (keyword recall, exact match, token F1, citations, grounding), abstention "
        "and speed; rows go to OUT/results.jsonl as they finish, the summary to OUT/report.md and report.json.",
    )
    parser.add_argument("questions", type=Path, metavar="QUESTIONS.jsonl", help="our question rows or Spec-Bench rows")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    parser.add_argument("--limit", type=int, default=None, help="only the first N valid questions")
    parser.add_argument(
        "--compare-plain",
        action="store_true",
        help="answer each question again with plain decoding: speedup and whether greedy answers are identical",
    )
    parser.add_argument("--resume", action="store_true", help="continue a run in OUT, skipping finished questions")
    parser.add_argument(
        "--retrieval-only", action="store_true", help="score retrieval only; loads no generation models"
    )
    add_copilot_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, copilot_factory: Callable[[CopilotOptions, bool], Copilot] | None = None) -> int:
    # the eval never goes back to a conversation once it moved on: nothing to park (parking.py)
    options = replace(copilot_options(args), park_positions=0)
    if args.limit is not None and args.limit < 1:
        raise SpecragError(f"--limit must be at least 1, got {args.limit}")
    questions, skipped = read_questions(args.questions, args.limit)
    for message in [*skipped, *filter(None, [ignored_fields(args.questions)])]:
        print(f"specrag: {message}", file=sys.stderr)
    if not questions:
        why = f"all {len(skipped)} rows were skipped (above)" if skipped else "the file holds no rows"
        raise SpecragError(
            f"no questions to evaluate in {args.questions}: {why}; each line needs a JSON object "
            'with an "id" and a non-empty "question", e.g. {"id": "q1", "question": "How do I drain a node?"}'
        )
    output_dir(args.out)  # before the models load: a wrong --out costs a second, not a run
    results = ResultsFile(args.out / RESULTS_NAME).open(args.resume)
    if results.repaired:
        print(f"specrag: dropped a torn last line ({results.repaired} bytes) from {results.path}", file=sys.stderr)
    todo = [q for q in questions if q.id not in results.finished]
    config = run_config(args, len(questions), len(skipped))
    if todo:
        copilot = (copilot_factory or load_copilot)(options, args.retrieval_only)
        if not args.retrieval_only:
            config |= copilot.loaded.describe()  # the weights actually loaded, not the flag values
        write_atomic(args.out / "run.json", json.dumps(config, indent=1, default=str) + "\n")
        evaluate_all(copilot, todo, results, args)
    wanted = {q.id for q in questions}
    summary = write_report(args.out, [r for r in results.rows if str(r["id"]) in wanted], config)
    print(summary_line(summary, args.out))
    return 0


def load_copilot(options: CopilotOptions, retrieval_only: bool) -> Copilot:
    return Copilot.retrieval_only(options) if retrieval_only else Copilot.load(options)


def evaluate_all(copilot: Copilot, todo: list, results: ResultsFile, args: argparse.Namespace) -> None:
    from tqdm import tqdm

    answer = copilot.options.answer
    with tqdm(total=len(todo), desc="eval", unit="q", file=sys.stderr, dynamic_ncols=True) as bar:
        for question in todo:
            bar.set_postfix_str(question.id, refresh=True)
            row = evaluate_question(copilot, question, answer, args.compare_plain, args.retrieval_only)
            results.append(row)
            if row["status"] != "ok":
                bar.write(f"specrag: {question.id}: {row['error']}", file=sys.stderr)
            bar.update(1)


def run_config(args: argparse.Namespace, questions: int, skipped: int) -> dict[str, Any]:
    if args.retrieval_only:
        retrieval = ("questions", "valid_questions", "skipped_rows", "index", "limit", "retrieval_only")
        return {key: value for key, value in _full_config(args, questions, skipped).items() if key in retrieval}
    return _full_config(args, questions, skipped)


def _full_config(args: argparse.Namespace, questions: int, skipped: int) -> dict[str, Any]:
    return {
        "questions": str(args.questions),
        "valid_questions": questions,
        "skipped_rows": skipped,
        "index": str(args.index) if args.index else None,
        "limit": args.limit,
        "passages": args.passages,
        "speculation": "none" if args.no_speculation else args.speculation,
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        "compare_plain": args.compare_plain,
        "code_from_sources": not args.free_code,
        "withhold_uncited": not args.show_uncited,
        "retrieval_only": args.retrieval_only,
        "target": args.target,
        "draft": args.draft,
    }
