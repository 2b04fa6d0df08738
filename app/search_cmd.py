"""`specrag search`: ranked chunks for a query, with fused and per-retriever scores."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.retriever import ScoredChunk

PREVIEW_CHARS = 240


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("search", help="search the index", description=__doc__.split(":", 1)[1].strip())
    parser.add_argument("query", nargs="+", help="the question or keywords")
    parser.add_argument("-k", type=int, default=8, help="number of chunks (default 8)")
    parser.add_argument(
        "--index", type=Path, help="index directory (default: $SPECRAG_HOME/index or ~/.cache/specrag/index)"
    )
    parser.add_argument(
        "--mode", choices=("hybrid", "dense", "bm25"), default="hybrid", help="retriever (default hybrid)"
    )
    parser.add_argument("--model", help="the index's embedding model directory, if it is not the packaged default")
    parser.add_argument("--json", action="store_true", help="print one JSON object with a `results` list")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.errors import RetrievalError
    from retrieval.retriever import open_index
    from retrieval.store import default_index_dir

    if args.k < 1:  # checked before the model load (~8 s), not after it
        raise RetrievalError(f"-k must be at least 1, got {args.k}")
    index_dir = args.index or default_index_dir()
    try:
        hybrid = open_index(index_dir, model=args.model)
    except OSError as err:
        raise RetrievalError(f"cannot read {err.filename or index_dir} ({err.strerror}); check the path") from err
    retriever = {"hybrid": hybrid, "dense": hybrid.dense, "bm25": hybrid.bm25}[args.mode]
    query = " ".join(args.query)
    started = time.perf_counter()
    results = retriever.retrieve(query, k=args.k)
    latency_ms = (time.perf_counter() - started) * 1000
    if args.json:
        payload = {
            "query": query,
            "k": args.k,
            "mode": args.mode,
            "index": str(index_dir),
            "latency_ms": round(latency_ms, 2),
            "results": [{"rank": i, **r.to_dict()} for i, r in enumerate(results, start=1)],
        }
        json.dump(payload, sys.stdout, ensure_ascii=False, indent=1)
        print()
    else:
        print("\n\n".join(format_result(i, r) for i, r in enumerate(results, start=1)) or "no results")
    return 0


def format_result(rank: int, result: ScoredChunk) -> str:
    parts = " | ".join(f"{name} {result.scores[name]:.3f} #{result.ranks[name]}" for name in result.ranks)
    where = (
        f"page {result.position.page}"
        if result.position.page
        else f"chars {result.position.start}-{result.position.end}"
    )
    preview = " ".join(result.text.split())
    preview = preview if len(preview) <= PREVIEW_CHARS else preview[: PREVIEW_CHARS - 3] + "..."
    return f"{rank}. {result.label}  [score {result.score:.4f} | {parts}]\n   {result.source} ({where})\n   {preview}"
