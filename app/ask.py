"""`specrag ask`: answer one question, streaming the answer; a front end of the copilot pipeline.

The passages come from `--context-file` files (split at blank lines) or, without any,
from the retrieval index, searched in a child process before the models load, so this process
never imports the retrieval stack (app/copilot/search_process.py). Statuses and the closing
summary (stats, sources, grounding warnings) go to stderr, the answer to stdout; `--json`
prints one object instead.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

from app.cli_options import add_copilot_args, copilot_options
from app.copilot import Copilot, CopilotOptions, Final, Passage, Status, Token, checked_question, collect
from app.copilot.options import one_question_context
from app.copilot.pipeline import SEARCHING
from app.copilot.search_process import SearchProcess
from app.copilot.summary import check_notes, shown_paths, source_heading, source_marks, stats_parts
from core.errors import SpecragError

_BLANK_LINES = re.compile(r"\n\s*\n")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ask",
        help="answer a question from the runbooks (or given passages)",
        description="Answer one question from the retrieved passages, streaming the answer.",
    )
    parser.add_argument("question", help="the question to answer")
    parser.add_argument(
        "--context-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a text file whose paragraphs are the context passages (repeatable); without one, the top passages of "
        "the retrieval index are used",
    )
    add_copilot_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = copilot_options(args)
    checked_question(args.question)  # before the models load: that takes a while
    paragraphs = [(name, text) for name in args.context_file for text in read_paragraphs(Path(name))]
    passages = [Passage(i + 1, text, Path(name).name) for i, (name, text) in enumerate(paragraphs)] or None
    if passages is None:  # retrieved passages have a known size: no KV cache for a conversation (options.py)
        context = one_question_context(options.answer.passages, options.answer.max_new_tokens)
        options = replace(options, models=replace(options.models, context=context))
    if passages is None:
        copilot, passages = load_and_search(args, options)
    else:
        copilot = Copilot.load(options)
    copilot.fit_context(args.question, passages)  # the context for this prompt, not the worst case (options.py)
    events = copilot.answer(args.question, passages=passages)
    final = collect(events, None if args.json else render)
    if args.json:
        print(json.dumps(answer_record(final)))
    else:
        print("" if final.answer.endswith("\n") else "\n", end="", flush=True)
        if final.withheld:  # any words before the withheld part were printed: say why the answer stops
            print(f"\n⚠ WITHHELD: {final.withheld}", flush=True)
        print_summary(final)
    return 0


def load_and_search(args: argparse.Namespace, options: CopilotOptions) -> tuple[Copilot, list[Passage]]:
    """Search the index as answer() would, in a child process, then load the models here (in this
    thread: torch's and OpenMP's thread settings stay with the generating thread). The child takes
    the index, its embedding model and their imports (torch, transformers, FAISS, bm25s) with it when
    it exits; this process only learns the model's id, for the gate. A missing index is reported at
    once. The models load after the child has exited, not beside it: llama.cpp pages the whole GGUF
    in as it loads, so the two together held 1.71-1.75 GB against 1.33 GB for this process alone,
    and the load costs the first token well under a second."""
    with SearchProcess(options, args.question, options.answer.passages) as search:
        if not args.json:
            render(Status("searching", SEARCHING))
        passages, embedding_model = search.result()
    copilot = Copilot.load(options)
    copilot.searched_with(embedding_model, search.pages)
    return copilot, passages


def read_paragraphs(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise SpecragError(f"context file {path} does not exist") from err
    except (OSError, UnicodeDecodeError) as err:
        raise SpecragError(f"cannot read context file {path}: {getattr(err, 'strerror', None) or err}") from err
    paragraphs = [p.strip() for p in _BLANK_LINES.split(text) if p.strip()]
    if not paragraphs:
        raise SpecragError(f"context file {path} has no text")
    return paragraphs


def render(event: object) -> None:
    if isinstance(event, Status):
        print(f"specrag: {event.message}", file=sys.stderr, flush=True)
        if event.stage == "passages":  # the sources before the answer: prefill takes a while
            for label in event.detail.get("sources", []):
                print(f"specrag:   {label}", file=sys.stderr, flush=True)
    elif isinstance(event, Token) and event.text:
        sys.stdout.write(event.text)
        sys.stdout.flush()


def print_summary(final: Final) -> None:
    print(stats_line(final), file=sys.stderr)
    if final.sources:
        print("Sources:", file=sys.stderr)
        paths = shown_paths(final.sources)
        for source in final.sources:
            print(f"  {source_line(source, paths[source['number']])}", file=sys.stderr)
    for level, text in check_notes(final, code=lambda text: f"`{text}`"):
        print(f"  {level}: {text}", file=sys.stderr)
    if final.gated:  # the web chat's and Slack's "Answer anyway"
        print("  to answer it from these sources anyway, under a warning: ask again with --gate warn", file=sys.stderr)


def stats_line(final: Final) -> str:
    return f"[{', '.join(stats_parts(final))}]"


def source_line(source: dict, path: str) -> str:
    heading = source_heading(source)
    score = f", score {source['score']:.3f}" if source["score"] is not None else ""
    marks = source_marks(source)
    suffix = f" - {', '.join(marks)}" if marks else ""
    return f"[{source['number']}] {source['title'] or source['path']}{heading} ({path}{score}){suffix}"


def answer_record(final: Final) -> dict:
    record = final.to_dict()
    record |= {
        "prompt_token_ids": final.prompt_ids,
        "output_token_ids": final.output_ids,
        "target_model": final.models.get("target"),
        "draft_model": final.models.get("draft"),
        "speculation": final.stats.get("speculation"),  # none for a gated answer: no model ran
    }
    return record
