"""`specrag ask`: answer one question from context passages, streaming the answer.

The passages come from `--context-file` files (split at blank lines) or, without any,
from the retrieval index when one exists. Models are built by `load_engine`, the one
place both `ask` and `bench` get an engine from (tests replace it with tiny models).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from app.prompting import build_messages, encode_chunks, encode_prompt
from core.errors import SpecragError

if TYPE_CHECKING:
    from generation.drafters import Origin
    from generation.engine import Completion, Engine, GenerationConfig

SPECULATION_CHOICES = ("none", "ngram", "model", "hybrid")
RETRIEVE_K = 6
_BLANK_LINES = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class Passage:
    text: str
    source: str
    title: str = ""


@dataclass
class LoadedEngine:
    engine: Engine
    target_path: str
    draft_path: str | None
    draft_int8: bool = False  # the draft's linear layers run with dynamic int8 weights
    linear_layout_patched: bool = False


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ask",
        help="answer a question from context passages",
        description="Answer one question from context passages, streaming the answer.",
    )
    parser.add_argument("question", help="the question to answer")
    parser.add_argument(
        "--context-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a text file whose paragraphs are the context passages (repeatable); "
        "without one, the top passages of the retrieval index are used if it exists",
    )
    add_sampling_args(parser)
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1.0: off)")
    parser.add_argument("--top-k", type=int, default=0, help="sample from the k best tokens only (default 0: off)")
    parser.add_argument(
        "--speculation",
        choices=SPECULATION_CHOICES,
        default="hybrid",
        help="how drafts are proposed (default hybrid: copy from the passages, else the draft model)",
    )
    parser.add_argument("--no-speculation", action="store_true", help="plain target decoding (= --speculation none)")
    parser.add_argument("--stop", action="append", default=[], metavar="STR", help="stop at this string (repeatable)")
    add_model_args(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")
    parser.set_defaults(func=run)


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for sampling (default 0)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="answer length limit (default 256)")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        default="default-target",
        metavar="NAME_OR_PATH",
        help="target model: default-target, a local HF model folder or a hub id",
    )
    parser.add_argument(
        "--draft",
        default="default-draft",
        metavar="NAME_OR_PATH|none",
        help="draft model: default-draft, a folder, a hub id, or none",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda (default auto)")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16", "float16"),
        help="target weights dtype (default auto: float32 on CPU, bf16/fp16 on GPU)",
    )
    parser.add_argument(
        "--draft-int8",
        default="auto",
        choices=("auto", "on", "off"),
        help="int8 weights for the draft model (default auto: on for a float32 CPU draft; exactness is unaffected)",
    )
    parser.add_argument(
        "--linear-layout",
        default="off",
        choices=("auto", "on", "off"),
        help="transposed matmul layout for small verification passes (default off; auto: where a microbenchmark "
        "finds it faster)",
    )
    parser.add_argument(  # numeric path (generation/numeric_path.py)
        "--quant",
        default="auto",
        choices=("auto", "int4", "int8", "none"),
        help="numeric path: int4/int8 weight-only CPU kernels, or none (float weights); default auto: the fastest "
        "measured on this CPU unless --dtype is given; float32 is --dtype float32",
    )


def load_engine(args: argparse.Namespace) -> LoadedEngine:
    """Load the target (and the draft, unless --draft none or the mode needs none) and wrap them in an Engine."""
    from generation.engine import Engine
    from generation.models import load_models

    mode = "none" if getattr(args, "no_speculation", False) else getattr(args, "speculation", "hybrid")  # bench: hybrid
    draft = args.draft if mode in ("model", "hybrid") and args.draft.lower() != "none" else None
    models = load_models(
        args.target,
        draft,
        args.device,
        args.dtype,
        getattr(args, "draft_int8", "auto"),
        getattr(args, "linear_layout", "off"),
        quant=getattr(args, "quant", "auto"),
    )
    engine = Engine(models.target, models.tokenizer, models.draft)
    return LoadedEngine(engine, models.target_path, models.draft_path, models.draft_int8, models.linear_layout_patched)


def run(args: argparse.Namespace) -> int:
    passages = gather_chunks(args)
    loaded = load_engine(args)
    engine = loaded.engine
    config = generation_config(args, speculation_mode(args, engine.draft is not None))
    messages = build_messages(
        args.question, [p.text for p in passages], [p.title for p in passages], [p.source for p in passages]
    )
    prompt_ids = encode_prompt(engine.tokenizer, messages)
    chunk_ids = encode_chunks(engine.tokenizer, [p.text for p in passages])
    completion = answer(engine, prompt_ids, chunk_ids, config, None if args.json else sys.stdout)
    sources = copied_sources(completion.origins, passages)
    if args.json:
        print(json.dumps(answer_record(args, loaded, config, prompt_ids, completion, passages, sources)))
    else:
        print("" if completion.text.endswith("\n") else "\n", end="", flush=True)
        print_summary(completion, config, sources)
    return 0


def gather_chunks(args: argparse.Namespace) -> list[Passage]:
    """The context passages: paragraphs of the --context-file files, else the index's top hits."""
    if args.context_file:
        return [passage for name in args.context_file for passage in read_passages(Path(name))]
    return retrieve_passages(args.question, RETRIEVE_K)


def read_passages(path: Path) -> list[Passage]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise SpecragError(f"context file {path} does not exist") from err
    except (OSError, UnicodeDecodeError) as err:
        raise SpecragError(f"cannot read context file {path}: {getattr(err, 'strerror', None) or err}") from err
    paragraphs = [p.strip() for p in _BLANK_LINES.split(text) if p.strip()]
    if not paragraphs:
        raise SpecragError(f"context file {path} has no text")
    return [Passage(p, path.name) for p in paragraphs]


def retrieve_passages(question: str, k: int) -> list[Passage]:
    """Top-k chunks from the retrieval index; none when retrieval or an index is missing."""
    try:
        from retrieval.errors import IndexNotFoundError
        from retrieval.retriever import open_index
    except ImportError:
        return []
    try:
        hits = open_index().retrieve(question, k)
    except IndexNotFoundError as err:
        print(f"specrag: {err}; answering without context", file=sys.stderr)
        return []
    return [Passage(hit.text, hit.source, getattr(hit, "title", "")) for hit in hits]


def speculation_mode(args: argparse.Namespace, has_draft: bool) -> str:
    mode = "none" if args.no_speculation else args.speculation
    if mode == "hybrid" and not has_draft:
        print("specrag: no draft model loaded: drafting by n-gram copies only (--speculation ngram)", file=sys.stderr)
        return "ngram"
    return mode


def generation_config(args: argparse.Namespace, speculation: str) -> GenerationConfig:
    from generation.engine import GenerationConfig
    from generation.sampling import SamplingParams

    try:
        sampling = SamplingParams(args.temperature, getattr(args, "top_p", 1.0), getattr(args, "top_k", 0))
    except ValueError as err:
        raise SpecragError(str(err)) from err
    return GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        sampling=sampling,
        stop_strings=tuple(getattr(args, "stop", ())),
        seed=args.seed,
        speculation=speculation,
    )


def answer(
    engine: Engine, prompt_ids: list[int], chunk_ids: list[list[int]], config: GenerationConfig, out: TextIO | None
) -> Completion:
    """Run the engine to the end, writing each text delta to `out` as it arrives."""

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    return engine.complete(prompt_ids, chunk_ids, config, on_text=write if out is not None else None)


def copied_sources(origins: list[Origin], passages: list[Passage]) -> list[dict]:
    """The passages the answer copied tokens from; `chunk` is 0-based as in origin labels."""
    counts = Counter(origin.chunk for origin in origins if origin.kind == "chunk")
    return [
        {"chunk": i, "passage": i + 1, "source": passages[i].source, "copied_tokens": n}
        for i, n in sorted(counts.items())
    ]


def print_summary(completion: Completion, config: GenerationConfig, sources: list[dict]) -> None:
    stats = completion.stats
    acceptance = f"{stats.acceptance_rate:.0%}" if sum(stats.drafted.values()) else "n/a"
    print(
        f"[{stats.new_tokens} tokens, {stats.decode_tokens_per_s:.2f} tok/s, "
        f"{stats.tokens_per_pass:.2f} tokens/pass, acceptance {acceptance}, prefill {stats.prefill_s:.1f} s, "
        f"speculation {config.speculation}, {completion.finish_reason}]",
        file=sys.stderr,
    )
    if sources:
        print("Sources:", file=sys.stderr)
        for source in sources:
            print(
                f"  [{source['passage']}] {source['source']} ({source['copied_tokens']} tokens copied)", file=sys.stderr
            )


def answer_record(
    args: argparse.Namespace,
    loaded: LoadedEngine,
    config: GenerationConfig,
    prompt_ids: list[int],
    completion: Completion,
    passages: list[Passage],
    sources: list[dict],
) -> dict:
    sampling = config.sampling
    return {
        "question": args.question,
        "answer": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_token_ids": prompt_ids,
        "output_token_ids": completion.token_ids,
        "origins": [origin.label for origin in completion.origins],
        "target_model": loaded.target_path,
        "draft_model": loaded.draft_path,
        "speculation": config.speculation,
        "sampling": {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "seed": config.seed,
        },
        "context": [{"passage": i + 1, "source": p.source} for i, p in enumerate(passages)],
        "sources": sources,
        "stats": completion.stats.to_dict(),
    }
