"""`specrag bench`: decode speed and time to first token of our speculative modes against
plain decoding, transformers' prompt lookup and assisted generation, and llama.cpp.

All methods share one process, run interleaved per question (order rotated per question)
after an unrecorded warm-up. The prompt is prefilled ONCE per question for our engine and
transformers' methods, so their speedups compare decode times only:
- our engine (plain = speculation "none", ngram, model, hybrid): the engine's CachedLM keeps
  a snapshot of the last prefilled prompt and reuses it. Decode time = Stats.decode_s, which
  includes the draft model's own prefill (model, hybrid): the product pays it per answer.
- transformers (hf-prompt-lookup, hf-assisted): bench_hf.py, from copies of the prefilled caches.
- llama.cpp (llamacpp-plain): bench_llamacpp.py, the same GGUF from an empty cache.
Time to first token adds the prompt's prefill to each method's wait for its first token.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.bench_hf import PROMPT_LOOKUP_TOKENS, run_hf
from app.bench_llamacpp import LlamaCppPlain, check_available
from app.bench_report import (
    SPEEDUP_DEFINITION,
    first_divergence,
    fmt,
    make_report,
    ratio,
    round4,
    run_record,
    write_results,
)
from app.cli_options import add_model_args, add_sampling_args, model_options
from app.copilot import AnswerOptions, Copilot, CopilotOptions
from app.copilot.prompting import encode_chunks, encode_prompt, fixed_prefix_length, spec_bench_rows
from core.errors import SpecragError
from core.hardware import cpu_name
from core.output_paths import output_file
from generation.model_store import gguf_file
from generation.path_names import LLAMACPP_PATHS

METHODS = ("plain", "hf-prompt-lookup", "hf-assisted", "ngram", "model", "hybrid", "llamacpp-plain")
ENGINE_MODES = {"plain": "none", "ngram": "ngram", "model": "model", "hybrid": "hybrid"}
NEEDS_DRAFT = ("hf-assisted", "model", "hybrid")
LLAMACPP = "llamacpp-plain"
WARMUP_TOKENS = 4

PREFILL_REUSE = {
    "engine": "target prefilled once per question; CachedLM.prefill reuses the snapshot of that prompt; "
    "the draft model starts each run from the chat template's fixed prefix and prefills the rest itself when "
    "it joins the answer, inside the decode time, as in the product; decode time = Stats.decode_s; "
    "TTFT = target prefill + first pass",
    "transformers": "generate(cache=deep copy of the target cache over prompt[:-1]); first assisted iteration "
    "fed only the uncached token; hf-assisted's assistant starts from a copy of the draft cache; "
    "decode time = wall time of the generate call; TTFT = target prefill (+ draft prefill for hf-assisted) "
    "+ the wait for the first streamed token",
    "llamacpp": "reset before every answer, so it prefills the whole prompt itself; TTFT = its wait for the "
    "first token; decode time = new tokens x its mean step after the first token",
}


@dataclass
class Prefilled:
    """One question's prompt, chunks and the caches every engine and transformers method starts from."""

    row: dict
    prompt_ids: list[int]
    chunk_ids: list[list[int]]
    target_cache: Any  # DynamicCache over prompt[:-1]
    draft_cache: Any  # DynamicCache over prompt[:-1], or None
    target_seconds: float
    draft_seconds: float
    fixed_prefix: int  # leading prompt tokens every question shares (the chat template's system part)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark decode speed and time to first token of every speculation method",
        description="Decode speed and time to first token of plain, n-gram, model and hybrid speculation, of "
        "transformers' prompt lookup and assisted generation, and of llama.cpp's plain decoding on Spec-Bench "
        "questions. " + SPEEDUP_DEFINITION,
    )
    parser.add_argument(
        "--questions",
        required=True,
        metavar="FILE",
        help="Spec-Bench jsonl, e.g. ../shared/benchmarks/spec_bench/rag.jsonl",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    add_sampling_args(parser)
    parser.add_argument(
        "--methods",
        default=None,
        help=f"comma list out of {','.join(METHODS)} (default all; {LLAMACPP} only when llama-cpp-python is "
        "installed; plain always runs)",
    )
    parser.add_argument(
        "--gguf",
        default=None,
        metavar="FILE",
        help=f"the target's GGUF for {LLAMACPP} (default: the packaged default target's)",
    )
    parser.add_argument(
        "--draft-context",
        type=int,
        default=None,
        metavar="N",
        help="the draft model reads its cached prefix plus the prompt's last N tokens (default: the engine's)",
    )
    parser.add_argument("--out", required=True, metavar="FILE.json", help="results JSON; a .md table is written beside")
    add_model_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = output_file(args.out, "bench.json")  # before a minute of loading and measuring
    methods = parse_methods(args.methods) if args.methods else default_methods()
    rows = spec_bench_rows(args.questions, args.limit)
    gguf = Path(args.gguf) if args.gguf else None
    if LLAMACPP in methods and gguf is None and (gguf := gguf_file(args.target)) is None:
        raise SpecragError(f"{LLAMACPP} needs the target as a GGUF file: pass --gguf FILE")
    if LLAMACPP in methods:
        check_available(gguf)
    _quiet_transformers()
    copilot = Copilot.load(CopilotOptions(models=model_options(args), park_positions=0))  # questions stand alone
    loaded = copilot.loaded
    plain_only = not loaded.engine.verifies_drafts
    if plain_only:  # measured as the product runs them on this path
        _progress(f"--quant {loaded.quant} verifies no drafts: every engine method decodes as plain does")
    methods = usable_methods(methods, loaded.engine.draft is not None or plain_only)
    if loaded.quant in LLAMACPP_PATHS and (hf := [m for m in methods if m.startswith("hf-")]):
        raise SpecragError(
            f"{', '.join(hf)} run transformers models, which --quant {loaded.quant} does not load: "
            "bench them on another path"
        )
    answer = AnswerOptions(
        speculation="none", temperature=args.temperature, seed=args.seed, max_new_tokens=args.max_new_tokens
    )
    config = copilot.generation_config(answer)
    if args.draft_context is not None:
        config = replace(config, draft_context=args.draft_context)
    record = config_record(args, loaded, methods, len(rows)) | {"gguf": str(gguf) if gguf else None}
    questions: list[dict] = []

    def save_so_far(question: dict) -> None:
        # rewritten atomically after every question: a long run that is stopped keeps what it measured
        questions.append(question)
        write_results(out, make_report(record, methods, questions, config.sampling.greedy))

    bench = Bench(loaded.engine, config, methods, gguf)
    if bench.llamacpp is not None:  # False: llama.cpp's default weight buffers crash here, so it ran without them
        record["llamacpp_extra_buffers"] = bench.llamacpp.extra_buffers
    bench.run(rows, on_question=save_so_far)
    print(write_results(out, make_report(record, methods, questions, config.sampling.greedy)))
    return 0


def default_methods() -> list[str]:
    """Every method; llamacpp-plain only where llama-cpp-python is installed (the optional bench extra)."""
    if importlib.util.find_spec("llama_cpp") is not None:
        return list(METHODS)
    _progress(f"llama-cpp-python is not installed: skipping {LLAMACPP} (pip install -e '.[bench]')")
    return [m for m in METHODS if m != LLAMACPP]


def parse_methods(text: str) -> list[str]:
    methods = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise SpecragError(f"unknown method(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(METHODS)}")
    return methods


def usable_methods(methods: list[str], has_draft: bool) -> list[str]:
    """Plain first (it is the reference); without a draft model, drop the methods that need one."""
    if "plain" not in methods:
        _progress("adding plain, the reference for speedup and identity")
    methods = ["plain", *[m for m in methods if m != "plain"]]
    if not has_draft and any(m in NEEDS_DRAFT for m in methods):
        _progress(f"no draft model: skipping {', '.join(m for m in methods if m in NEEDS_DRAFT)}")
        methods = [m for m in methods if m not in NEEDS_DRAFT]
    return methods


class Bench:
    def __init__(self, engine: Any, config: Any, methods: list[str], gguf: Path | None = None) -> None:
        self.engine, self.config, self.methods = engine, config, methods
        self.llamacpp: LlamaCppPlain | None = None
        if LLAMACPP in methods:
            if gguf is None:
                raise SpecragError(f"{LLAMACPP} needs the target as a GGUF file: pass --gguf FILE")
            import torch

            self.llamacpp = LlamaCppPlain(gguf, torch.get_num_threads(), engine.eos, config.seed)

    def run(self, rows: list[dict], on_question: Callable[[dict], None] | None = None) -> list[dict]:
        done = []
        for i, row in enumerate(rows):
            done.append(self.run_question(row, f"[{i + 1}/{len(rows)}] q{row['question_id']}", warm_up=i == 0, shift=i))
            if on_question is not None:
                on_question(done[-1])
        return done

    def run_question(self, row: dict, tag: str, warm_up: bool, shift: int) -> dict:
        """Prefill once, run every method (order rotated by `shift`), compare each with plain."""
        pre = self.prefill(row)
        _progress(
            f"{tag}: prompt {len(pre.prompt_ids)} tokens, {len(pre.chunk_ids)} chunks, "
            f"prefill {pre.target_seconds:.1f} s (+ draft {pre.draft_seconds:.1f} s)"
        )
        if warm_up:
            self.warm_up(pre)
        shift %= len(self.methods)
        order = self.methods[shift:] + self.methods[:shift]
        runs = {}
        for method in order:
            run = runs[method] = self.run_method(method, pre, self.config)
            _progress(
                f"{tag} {method}: {run['new_tokens']} tokens, {fmt(run['tokens_per_s'])} tok/s, "
                f"first token after {fmt(run['ttft_s'])} s"
            )
        self.compare(pre, runs)
        return question_record(pre, order, {m: runs[m] for m in self.methods})

    def prefill(self, row: dict) -> Prefilled:
        """Prefill the target (and the draft, for hf-assisted) once; the engine's CachedLMs keep the snapshots."""
        tokenizer = self.engine.tokenizer
        prompt = encode_prompt(tokenizer, [{"role": "user", "content": row["turn"]}])
        chunks = encode_chunks(tokenizer, row["chunks"])
        # only transformers' assisted generation starts from a prefilled draft; our engine prefills its own
        snap = self.engine.prefill_snapshot(prompt, with_draft="hf-assisted" in self.methods)
        fixed = fixed_prefix_length(tokenizer, prompt)
        return Prefilled(
            row, prompt, chunks, snap.target_cache, snap.draft_cache, snap.target_seconds, snap.draft_seconds, fixed
        )

    def warm_up(self, pre: Prefilled) -> None:
        config = replace(self.config, max_new_tokens=min(WARMUP_TOKENS, self.config.max_new_tokens))
        for method in self.methods:
            self.run_method(method, pre, config)
        _progress(f"warm-up done ({', '.join(self.methods)}, {config.max_new_tokens} tokens each)")

    def run_method(self, method: str, pre: Prefilled, config: Any) -> dict:
        if method in ENGINE_MODES:
            return self.run_engine(ENGINE_MODES[method], pre, config)
        if method == LLAMACPP:
            return self.llamacpp.run(pre.prompt_ids, config)
        run = run_hf(self.engine, method, pre.prompt_ids, (pre.target_cache, pre.draft_cache), config)
        prefill = pre.target_seconds + (pre.draft_seconds if method == "hf-assisted" else 0.0)
        return run | {"ttft_s": _add(prefill, run["first_token_s"])}

    def run_engine(self, mode: str, pre: Prefilled, config: Any) -> dict:
        if self.engine.draft is not None:
            # as in the product, the draft model starts from the fixed chat prefix of the last answer and
            # prefills the rest itself, inside the decode time (prefill_snapshot left the whole prompt cached)
            self.engine.draft.trim_snapshot(pre.fixed_prefix)
        done = self.engine.complete(pre.prompt_ids, pre.chunk_ids, replace(config, speculation=mode))
        stats = done.stats
        drafted = sum(stats.drafted.values())
        run = run_record(
            done.token_ids,
            stats.decode_s,
            stats.target_passes,
            drafted if mode != "none" else None,
            sum(stats.accepted.values()),
            done.finish_reason,
            done.text,
            stats.ttft_s,
        )
        ttft = _add(pre.target_seconds, stats.ttft_s)
        return run | {"ttft_s": ttft, "draft_prefill_s": round4(stats.draft_prefill_s)}

    def compare(self, pre: Prefilled, runs: dict[str, dict]) -> None:
        """Per-question speedup over plain; under greedy, where and how each output departs from plain."""
        plain = runs["plain"]
        margins: dict[int, float | None] = {}
        for run in runs.values():
            run["speedup"] = round4(ratio(run["tokens_per_s"], plain["tokens_per_s"]))
            if not self.config.sampling.greedy:
                run |= {"identical_to_plain": None, "first_divergence": None, "divergence_margin": None}
                continue
            index = first_divergence(plain["output_token_ids"], run["output_token_ids"])
            if index is not None and index not in margins and index < len(plain["output_token_ids"]):
                margins[index] = self.engine.logit_margin(
                    pre.target_cache, [pre.prompt_ids[-1], *plain["output_token_ids"][:index]]
                )
            run |= {
                "identical_to_plain": index is None,
                "first_divergence": index,
                "divergence_margin": margins.get(index) if index is not None else None,
            }


def question_record(pre: Prefilled, order: list[str], runs: dict[str, dict]) -> dict:
    row = pre.row
    return {
        "question_id": row["question_id"],
        "category": row["category"],
        "prompt_tokens": len(pre.prompt_ids),
        "chunks": len(pre.chunk_ids),
        "prefill_s": round(pre.target_seconds, 4),
        "draft_prefill_s": round(pre.draft_seconds, 4),
        "order": order,
        "methods": runs,
    }


def config_record(args: argparse.Namespace, loaded: Any, methods: list[str], questions: int) -> dict:
    import torch
    import transformers

    model = loaded.engine.target.model
    return {
        "questions_file": str(Path(args.questions).resolve()),
        "questions": questions,
        "limit": args.limit,
        "methods": methods,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
        "target_model": args.target,
        "target_path": loaded.target_path,
        "draft_model": args.draft,
        "draft_path": loaded.draft_path,
        "draft_int8": loaded.draft_int8,
        "linear_layout_patched": loaded.linear_layout_patched,
        "quant": loaded.quant,  # the numeric path: int4 | int8 | none (model.dtype says float32 on int4)
        "device": str(model.device),
        "dtype": str(model.dtype).removeprefix("torch."),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "prompt_lookup_num_tokens": PROMPT_LOOKUP_TOKENS,
        "cpu": cpu_name(),
        "warmup_tokens": WARMUP_TOKENS,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "prefill_reuse": PREFILL_REUSE,
    }


def _add(a: float | None, b: float | None) -> float | None:
    return round(a + b, 4) if a is not None and b is not None else None


def _progress(message: str) -> None:
    print(f"specrag bench: {message}", file=sys.stderr, flush=True)


def _quiet_transformers() -> None:
    from transformers.utils import logging

    logging.set_verbosity_error()  # generate's deprecation notes would drown the progress lines
