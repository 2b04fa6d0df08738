"""`specrag ingest`: build or refresh the hybrid index from folders of documents or a named corpus."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

# each named corpus: the module under corpora/ and its function that returns the folder (fetching it if need be)
_RECIPES = {
    "slurm": ("corpora.slurm", "ensure_slurm_docs"),
    "slurm-man": ("corpora.slurm_man", "ensure_slurm_man_pages"),
    "haproxy": ("corpora.haproxy", "ensure_haproxy_docs"),
    "apache": ("corpora.apache", "ensure_apache_docs"),
    "icinga": ("corpora.icinga", "ensure_icinga_docs"),
    "rsyslog": ("corpora.rsyslog", "ensure_rsyslog_docs"),
    "bacula": ("corpora.bacula", "ensure_bacula_docs"),
    "runbooks": ("corpora", "bundled_runbooks_dir"),
}
CORPORA = tuple(_RECIPES)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="index documents (.md .txt .rst .html .pdf .docx, man pages, each also gzipped) for search",
        description="Index folders of documents; re-running embeds only new or changed files "
        "and drops chunks of removed ones. With no PATH, refreshes the tracked folders that are bundled "
        "or downloaded corpora; name any other folder to refresh it (tracked folders not named keep their chunks).",
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="files or folders (walked recursively)")
    parser.add_argument("--corpus", action="append", choices=CORPORA, default=[], help="a named corpus (repeatable)")
    parser.add_argument(
        "--index", type=Path, help="index directory (default: $SPECRAG_HOME/index or ~/.cache/specrag/index)"
    )
    parser.add_argument("--rebuild", action="store_true", help="start a fresh index (e.g. to change model or chunking)")
    parser.add_argument("--model", help="sentence-transformers model directory (default: packaged all-MiniLM-L6-v2)")
    parser.add_argument(
        "--precision",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="embedding matmul precision; auto = bfloat16 where the CPU does it natively (AMX/AVX512-BF16)",
    )
    parser.add_argument("--chunk-tokens", type=int, help="chunk size in the model's tokens (default 200)")
    parser.add_argument("--overlap-tokens", type=int, help="overlap between chunks in tokens (default 32)")
    parser.add_argument("--max-file-mb", type=float, default=20.0, help="skip files larger than this (default 20)")
    parser.add_argument(
        "--follow-symlinks", action="store_true", help="also index files whose symlinks point outside the folder"
    )
    parser.add_argument("--json", action="store_true", help="print the ingest report as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def corpus_path(name: str) -> Path:
    """The folder of a named corpus (the Debian docs are fetched and unpacked on first use)."""
    from retrieval.errors import RetrievalError

    if name not in _RECIPES:
        raise RetrievalError(f"unknown corpus {name!r}; choose one of {', '.join(CORPORA)}")
    module, function = _RECIPES[name]
    try:
        folder = getattr(importlib.import_module(module), function)
    except ImportError as err:
        raise RetrievalError(f"corpus {name!r} is not available in this install ({err})") from err
    return folder()


def ensure_corpus_index(name: str, index_dir: Path | None = None, embedder: object = None) -> object | None:
    """Build the index at index_dir from a named corpus unless it already holds one (the chat's first start).

    Returns the ingest report, or None when an index was already there.
    """
    from retrieval.ingest import ingest
    from retrieval.store import current_generation, default_index_dir

    index_dir = index_dir or default_index_dir()
    if index_dir.is_dir() and current_generation(index_dir) is not None:
        return None
    return ingest([corpus_path(name)], index_dir, embedder=embedder)


def run(args: argparse.Namespace) -> int:
    from retrieval.errors import RetrievalError
    from retrieval.ingest import IngestOptions, ingest
    from retrieval.store import default_index_dir

    options = IngestOptions(
        model=args.model,
        precision=args.precision,
        chunk_tokens=args.chunk_tokens,
        overlap_tokens=args.overlap_tokens,
        max_file_bytes=int(args.max_file_mb * 2**20),
        rebuild=args.rebuild,
        progress=not args.quiet and not args.json,
        follow_symlinks=args.follow_symlinks,
    )
    options.check()  # before a corpus download or a model load
    paths = list(args.paths) + [corpus_path(name) for name in args.corpus]
    try:
        report = ingest(paths, args.index or default_index_dir(), options)
    except OSError as err:
        raise RetrievalError(f"cannot use {err.filename or 'a file'} ({err.strerror}); check the path") from err
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1)
        print()
    else:
        print(report.summary())
    if report.chunks == 0:
        print("specrag: nothing indexed: no readable documents found", file=sys.stderr)
        return 1
    return 0
