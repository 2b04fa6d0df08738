"""`specrag bench`: decode speed of our speculative modes against plain decoding and
transformers' prompt lookup and assisted generation, on Spec-Bench style questions.

All methods share one process and one copy of the models, run interleaved per question
(order rotated per question) after an unrecorded warm-up. Speed is measured on decode
time only, and the prompt is prefilled ONCE per question:
- our engine (plain = speculation "none", ngram, model, hybrid): the engine's CachedLM keeps
  a snapshot of the last prefilled prompt and reuses it, so only the first method pays
  the prefill (outside decode time anyway). Decode time = Stats.decode_s.
- transformers (hf-prompt-lookup, hf-assisted): `generate(input_ids=prompt, cache=deep copy
  of the prefilled target cache)`, timed around the call. transformers 5.24 assisted
  decoding feeds the whole input again on its first iteration even with a filled cache,
  so `prepare_inputs_for_generation` is wrapped to feed only what the cache lacks (as its
  own `_prefill` does for greedy search); hf-assisted's assistant starts from a deep copy
  of the prefilled draft cache. Target passes are counted by wrapping the target forward.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.cli_options import add_model_args, add_sampling_args, model_options
from app.copilot import AnswerOptions, Copilot, CopilotOptions
from app.copilot.prompting import encode_chunks, encode_prompt, spec_bench_rows
from core.atomic import write_atomic
from core.errors import SpecragError

METHODS = ("plain", "hf-prompt-lookup", "hf-assisted", "ngram", "model", "hybrid")
ENGINE_MODES = {"plain": "none", "ngram": "ngram", "model": "model", "hybrid": "hybrid"}
NEEDS_DRAFT = ("hf-assisted", "model", "hybrid")
PROMPT_LOOKUP_TOKENS = 10
WARMUP_TOKENS = 4
SPEEDUP_DEFINITION = (
    "speedup = geometric mean over questions of (method new tokens / method decode s) / "
    "(plain new tokens / plain decode s); decode time excludes the prompt prefill, which is done once per "
    "question and reused by every method. tok/s = total new tokens / total decode seconds; tokens/pass = "
    "total new tokens / total target decode passes (bonus token included, 1.00 for plain); acceptance = "
    "accepted / drafted tokens; identical_to_plain = fraction of questions whose greedy output ids equal plain's."
)

PREFILL_REUSE = {
    "engine": "prefilled once per question; CachedLM.prefill reuses the snapshot of that prompt; "
    "decode time = Stats.decode_s",
    "transformers": "generate(cache=deep copy of the target cache over prompt[:-1]); first assisted iteration "
    "fed only the uncached token; hf-assisted's assistant starts from a copy of the draft cache; "
    "decode time = wall time of the generate call",
}


@dataclass
class Prefilled:
    """One question's prompt, chunks and the caches every method starts from."""

    row: dict
    prompt_ids: list[int]
    chunk_ids: list[list[int]]
    target_cache: Any  # DynamicCache over prompt[:-1]
    draft_cache: Any  # DynamicCache over prompt[:-1], or None
    seconds: float


@dataclass
class HFCounts:
    passes: int = 0
    drafted: int = 0
    accepted: int = 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark decode speed of every speculation method",
        description="Decode speed of plain, n-gram, model and hybrid speculation and of transformers' prompt lookup "
        "and assisted generation on Spec-Bench questions. " + SPEEDUP_DEFINITION,
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
        default=",".join(METHODS),
        help=f"comma list out of {','.join(METHODS)} (default all; plain always runs)",
    )
    parser.add_argument("--out", required=True, metavar="FILE.json", help="results JSON; a .md table is written beside")
    add_model_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    methods = parse_methods(args.methods)
    rows = spec_bench_rows(args.questions, args.limit)
    _quiet_transformers()
    copilot = Copilot.load(CopilotOptions(models=model_options(args)))
    loaded = copilot.loaded
    methods = usable_methods(methods, loaded.engine.draft is not None)
    answer = AnswerOptions(
        speculation="none", temperature=args.temperature, seed=args.seed, max_new_tokens=args.max_new_tokens
    )
    config = copilot.generation_config(answer)
    record = config_record(args, loaded, methods, len(rows))
    questions: list[dict] = []

    def save_so_far(question: dict) -> None:
        # rewritten atomically after every question: a long run that is stopped keeps what it measured
        questions.append(question)
        write_results(Path(args.out), make_report(record, methods, questions, config.sampling.greedy))

    Bench(loaded.engine, config, methods).run(rows, on_question=save_so_far)
    print(write_results(Path(args.out), make_report(record, methods, questions, config.sampling.greedy)))
    return 0


def parse_methods(text: str) -> list[str]:
    methods = list(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise SpecragError(f"unknown method(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(METHODS)}")
    return methods


def usable_methods(methods: list[str], has_draft: bool) -> list[str]:
    """Plain first (it is the reference); without a draft model, drop the methods that need one."""
    if "plain" not in methods:
        print("specrag bench: adding plain, the reference for speedup and identity", file=sys.stderr)
    methods = ["plain", *[m for m in methods if m != "plain"]]
    if not has_draft and any(m in NEEDS_DRAFT for m in methods):
        print(
            f"specrag bench: no draft model: skipping {', '.join(m for m in methods if m in NEEDS_DRAFT)}",
            file=sys.stderr,
        )
        methods = [m for m in methods if m not in NEEDS_DRAFT]
    return methods


class Bench:
    def __init__(self, engine: Any, config: Any, methods: list[str]) -> None:
        self.engine, self.config, self.methods = engine, config, methods

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
            f"{tag}: prompt {len(pre.prompt_ids)} tokens, {len(pre.chunk_ids)} chunks, prefill {pre.seconds:.1f} s"
        )
        if warm_up:
            self.warm_up(pre)
        shift %= len(self.methods)
        order = self.methods[shift:] + self.methods[:shift]
        runs = {}
        for method in order:
            run = runs[method] = self.run_method(method, pre, self.config)
            _progress(f"{tag} {method}: {run['new_tokens']} tokens, {_fmt(run['tokens_per_s'])} tok/s")
        self.compare(pre, runs)
        return question_record(pre, order, {m: runs[m] for m in self.methods})

    def prefill(self, row: dict) -> Prefilled:
        """Prefill target and draft once; the engine's CachedLMs keep the snapshots for every method."""
        tokenizer = self.engine.tokenizer
        prompt = encode_prompt(tokenizer, [{"role": "user", "content": row["turn"]}])
        chunks = encode_chunks(tokenizer, row["chunks"])
        snapshot = self.engine.prefill_snapshot(prompt)
        return Prefilled(row, prompt, chunks, snapshot.target_cache, snapshot.draft_cache, snapshot.seconds)

    def warm_up(self, pre: Prefilled) -> None:
        config = replace(self.config, max_new_tokens=min(WARMUP_TOKENS, self.config.max_new_tokens))
        for method in self.methods:
            self.run_method(method, pre, config)
        _progress(f"warm-up done ({', '.join(self.methods)}, {config.max_new_tokens} tokens each)")

    def run_method(self, method: str, pre: Prefilled, config: Any) -> dict:
        if method in ENGINE_MODES:
            return self.run_engine(ENGINE_MODES[method], pre, config)
        return self.run_hf(method, pre, config)

    def run_engine(self, mode: str, pre: Prefilled, config: Any) -> dict:
        done = self.engine.complete(pre.prompt_ids, pre.chunk_ids, replace(config, speculation=mode))
        stats = done.stats
        drafted = sum(stats.drafted.values())
        return run_record(
            done.token_ids,
            stats.decode_s,
            stats.target_passes,
            drafted if mode != "none" else None,
            sum(stats.accepted.values()),
            done.finish_reason,
            done.text,
        )

    def run_hf(self, method: str, pre: Prefilled, config: Any) -> dict:
        import torch

        model = self.engine.target.model
        kwargs = self.hf_kwargs(method, config)
        cache = copy.deepcopy(pre.target_cache)
        assistant_cache = copy.deepcopy(pre.draft_cache) if method == "hf-assisted" else None
        input_ids = torch.tensor([pre.prompt_ids], device=model.device)
        torch.manual_seed(config.seed)  # transformers samples from the global generator
        with hf_hooks(model, assistant_cache) as counts:
            start = time.perf_counter()
            output = model.generate(input_ids=input_ids, cache=cache, **kwargs)
            seconds = time.perf_counter() - start
        tokens = output[0, len(pre.prompt_ids) :].tolist()
        finish = "eos" if tokens and tokens[-1] in self.engine.eos else "length"
        text = self.engine.tokenizer.decode(tokens, skip_special_tokens=True)
        return run_record(tokens, seconds, counts.passes, counts.drafted, counts.accepted, finish, text)

    def hf_kwargs(self, method: str, config: Any) -> dict:
        eos = sorted(self.engine.eos)
        pad = self.engine.tokenizer.pad_token_id
        kwargs = {
            "max_new_tokens": config.max_new_tokens,
            "eos_token_id": eos,
            "pad_token_id": pad if pad is not None else eos[0],
            "do_sample": not config.sampling.greedy,
        }
        if not config.sampling.greedy:
            kwargs |= {
                "temperature": config.sampling.temperature,
                "top_p": config.sampling.top_p,
                "top_k": config.sampling.top_k,
            }
        if method == "hf-prompt-lookup":
            kwargs["prompt_lookup_num_tokens"] = PROMPT_LOOKUP_TOKENS
        elif method == "hf-assisted":
            kwargs["assistant_model"] = self.engine.draft.model
        return kwargs

    def compare(self, pre: Prefilled, runs: dict[str, dict]) -> None:
        """Per-question speedup over plain; under greedy, where and how each output departs from plain."""
        plain = runs["plain"]
        margins: dict[int, float | None] = {}
        for run in runs.values():
            run["speedup"] = _round(_ratio(run["tokens_per_s"], plain["tokens_per_s"]))
            if not self.config.sampling.greedy:
                run |= {"identical_to_plain": None, "first_divergence": None, "divergence_margin": None}
                continue
            index = first_divergence(plain["output_token_ids"], run["output_token_ids"])
            if index is not None and index not in margins:
                margins[index] = self.divergence_margin(pre, plain["output_token_ids"], index)
            run |= {
                "identical_to_plain": index is None,
                "first_divergence": index,
                "divergence_margin": margins.get(index) if index is not None else None,
            }

    def divergence_margin(self, pre: Prefilled, plain_ids: list[int], index: int) -> float | None:
        """Target top-1 minus top-2 logit after prompt + plain[:index]: a tiny margin means rounding."""
        import torch

        from generation.cached_lm import CachedLM

        if index >= len(plain_ids):
            return None
        lm = CachedLM(self.engine.target.model)
        lm.cache = copy.deepcopy(pre.target_cache)
        logits = lm.extend([pre.prompt_ids[-1], *plain_ids[:index]], last_only=True)[-1].float()
        top = torch.topk(logits, 2).values
        return round(float(top[0] - top[1]), 6)


@contextmanager
def hf_hooks(model: Any, assistant_cache: Any) -> Iterator[HFCounts]:
    """Count target passes and drafts, start from a filled cache on the first assisted step, prefill the assistant."""
    counts = HFCounts()
    forward, prepare = model.forward, model.prepare_inputs_for_generation
    make_candidates = model._get_candidate_generator

    @functools.wraps(forward)
    def counted_forward(*args: Any, **kwargs: Any) -> Any:
        counts.passes += 1
        return forward(*args, **kwargs)

    @functools.wraps(prepare)
    def prepare_after_cache(input_ids: Any, **kwargs: Any) -> Any:
        cache = kwargs.get("cache")
        cached = cache.get_seq_length() if cache is not None else 0
        if kwargs.get("next_sequence_length") is None and 0 < cached < input_ids.shape[1]:
            kwargs["next_sequence_length"] = input_ids.shape[1] - cached  # feed only what the cache lacks
        return prepare(input_ids, **kwargs)

    @functools.wraps(make_candidates)
    def candidates_with_counts(*args: Any, **kwargs: Any) -> Any:
        generator = make_candidates(*args, **kwargs)
        if assistant_cache is not None and hasattr(generator, "assistant_kwargs"):
            generator.assistant_kwargs["cache"] = assistant_cache  # it crops what it must re-feed
        update = generator.update_candidate_strategy

        def counted_update(input_ids: Any, scores: Any, num_matches: Any) -> Any:
            counts.drafted += scores.shape[1] - 1  # scores cover the candidates plus the bonus position
            counts.accepted += int(num_matches)
            return update(input_ids, scores, num_matches)

        generator.update_candidate_strategy = counted_update
        return generator

    patches = {
        "forward": counted_forward,
        "prepare_inputs_for_generation": prepare_after_cache,
        "_get_candidate_generator": candidates_with_counts,
    }
    saved = {name: vars(model)[name] for name in patches if name in vars(model)}  # earlier instance-level patches
    for name, patch in patches.items():
        setattr(model, name, patch)
    try:
        yield counts
    finally:
        for name in patches:
            delattr(model, name)
        for name, value in saved.items():
            setattr(model, name, value)


def run_record(
    tokens: list[int], seconds: float, passes: int, drafted: int | None, accepted: int, finish: str, text: str
) -> dict:
    return {
        "new_tokens": len(tokens),
        "decode_s": round(seconds, 4),
        "tokens_per_s": round(len(tokens) / seconds, 4) if seconds > 0 else None,
        "target_passes": passes,
        "tokens_per_pass": round(len(tokens) / passes, 4) if passes else None,
        "drafted": drafted,
        "accepted": accepted if drafted is not None else None,
        "acceptance_rate": round(accepted / drafted, 4) if drafted else None,
        "finish_reason": finish,
        "output_token_ids": tokens,
        "text": text,
    }


def first_divergence(reference: list[int], tokens: list[int]) -> int | None:
    for i, (a, b) in enumerate(zip(reference, tokens, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(tokens) else min(len(reference), len(tokens))


def question_record(pre: Prefilled, order: list[str], runs: dict[str, dict]) -> dict:
    row = pre.row
    return {
        "question_id": row["question_id"],
        "category": row["category"],
        "prompt_tokens": len(pre.prompt_ids),
        "chunks": len(pre.chunk_ids),
        "prefill_s": round(pre.seconds, 4),
        "order": order,
        "methods": runs,
    }


def make_report(config: dict, methods: list[str], questions: list[dict], greedy: bool) -> dict:
    summary = {m: summarize([q["methods"][m] for q in questions], greedy) for m in methods}
    return {"config": config, "speedup_definition": SPEEDUP_DEFINITION, "summary": summary, "questions": questions}


def summarize(runs: list[dict], greedy: bool) -> dict:
    tokens = sum(r["new_tokens"] for r in runs)
    seconds = sum(r["decode_s"] for r in runs)
    passes = sum(r["target_passes"] for r in runs)
    drafted = sum(r["drafted"] or 0 for r in runs)
    speedups = [r["speedup"] for r in runs if r["speedup"]]
    identical = [r["identical_to_plain"] for r in runs]
    return {
        "tokens_per_s": _round(_ratio(tokens, seconds)),
        "speedup": _round(math.exp(sum(map(math.log, speedups)) / len(speedups))) if speedups else None,
        "tokens_per_pass": _round(_ratio(tokens, passes)),
        "acceptance_rate": _round(_ratio(sum(r["accepted"] or 0 for r in runs), drafted)) if drafted else None,
        "identical_to_plain": _round(sum(identical) / len(identical)) if greedy and identical else None,
        "mean_new_tokens": _round(tokens / len(runs)) if runs else None,
        "total_new_tokens": tokens,
        "total_decode_s": _round(seconds),
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
        "warmup_tokens": WARMUP_TOKENS,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "prefill_reuse": PREFILL_REUSE,
    }


def markdown_table(report: dict) -> str:
    config = report["config"]
    lines = [
        f"# specrag bench: {Path(config['questions_file']).name}, {config['questions']} questions",
        "",
        f"max_new_tokens {config['max_new_tokens']}, temperature {config['temperature']}, "
        f"{config['device']} {config['dtype']}, {config['torch_threads']} threads, {config['date']}",
        "",
        "| method | tok/s | speedup | tokens/pass | acceptance | identical_to_plain | mean new tokens |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for method, s in report["summary"].items():
        lines.append(
            f"| {method} | {_fmt(s['tokens_per_s'])} | {_fmt(s['speedup'], 'x')} | "
            f"{_fmt(s['tokens_per_pass'])} | {_fmt(s['acceptance_rate'])} | "
            f"{_fmt(s['identical_to_plain'])} | {_fmt(s['mean_new_tokens'], '', 1)} |"
        )
    return "\n".join([*lines, "", report["speedup_definition"], ""])


def write_results(path: Path, report: dict) -> str:
    """Write the JSON and the markdown table beside it, each atomically; return the table."""
    table = markdown_table(report)
    payload = json.dumps(report, indent=1)
    write_atomic(path, payload)
    write_atomic(path.with_suffix(".md"), table)
    return table


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _round(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def _fmt(value: float | None, suffix: str = "", digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def _progress(message: str) -> None:
    print(f"specrag bench: {message}", file=sys.stderr, flush=True)


def _quiet_transformers() -> None:
    from transformers.utils import logging

    logging.set_verbosity_error()  # generate's deprecation notes would drown the progress lines
