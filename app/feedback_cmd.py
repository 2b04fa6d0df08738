"""`specrag feedback export --out FILE.jsonl`: the votes from the web chat and Slack, one per line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.feedback import FeedbackStore, default_feedback_path
from core.output_paths import output_file


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("feedback", help="export the thumbs up/down votes", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="write every vote as JSON lines")
    export.add_argument("--out", type=Path, required=True, metavar="FILE.jsonl", help="where to write")
    export.add_argument("--db", type=Path, default=None, help=f"feedback store (default {default_feedback_path()})")
    export.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    count = FeedbackStore(args.db).export_jsonl(output_file(args.out, "votes.jsonl"))
    print(f"specrag: exported {count} votes to {args.out}", file=sys.stderr)
    return 0
