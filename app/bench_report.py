"""`specrag bench`'s records and report: one record per method run, per-method summaries,
and the JSON + markdown pair written atomically after every question."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from core.atomic import write_atomic

SPEEDUP_DEFINITION = (
    "speedup = geometric mean over questions of (method new tokens / method decode s) / "
    "(plain new tokens / plain decode s); decode time excludes the target's prompt prefill, which is done once "
    "per question and reused by every engine and transformers method, and includes our draft model's prefill "
    "(model, hybrid), which the product pays per answer. slowest = the lowest per-question speedup. "
    "tok/s = total new tokens / total decode seconds; tokens/pass = total new tokens / total target decode "
    "passes (bonus token included, 1.00 for plain); acceptance = accepted / drafted tokens; time to first token "
    "= the prompt's prefill (target only, unless the method needs the draft prefilled before its first token) "
    "plus the method's wait for its first new token, mean over questions; llamacpp-plain prefills the prompt "
    "itself from an empty cache and its decode time starts at its first token; identical_to_plain = fraction of "
    "questions whose greedy output ids equal plain's (llamacpp-plain runs another numeric model, so it is not "
    "expected to be 1)."
)


def run_record(
    tokens: list[int],
    seconds: float,
    passes: int,
    drafted: int | None,
    accepted: int,
    finish: str,
    text: str,
    first_token_s: float | None = None,
) -> dict:
    """One method's answer to one question. first_token_s: from the method's start to its first new token."""
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
        "first_token_s": round4(first_token_s),
        "ttft_s": None,  # set by the bench: prefill + first_token_s
        "output_token_ids": tokens,
        "text": text,
    }


def first_divergence(reference: list[int], tokens: list[int]) -> int | None:
    for i, (a, b) in enumerate(zip(reference, tokens, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(tokens) else min(len(reference), len(tokens))


def make_report(config: dict, methods: list[str], questions: list[dict], greedy: bool) -> dict:
    summary = {m: summarize([q["methods"][m] for q in questions], greedy) for m in methods}
    return {"config": config, "speedup_definition": SPEEDUP_DEFINITION, "summary": summary, "questions": questions}


def summarize(runs: list[dict], greedy: bool) -> dict:
    tokens = sum(r["new_tokens"] for r in runs)
    seconds = sum(r["decode_s"] for r in runs)
    passes = sum(r["target_passes"] or 0 for r in runs)
    drafted = sum(r["drafted"] or 0 for r in runs)
    speedups = [r["speedup"] for r in runs if r["speedup"]]
    identical = [r["identical_to_plain"] for r in runs]
    ttfts = [r["ttft_s"] for r in runs if r.get("ttft_s") is not None]
    draft_prefills = [r["draft_prefill_s"] for r in runs if r.get("draft_prefill_s") is not None]
    return {
        "tokens_per_s": round4(ratio(tokens, seconds)),
        "speedup": round4(math.exp(sum(map(math.log, speedups)) / len(speedups))) if speedups else None,
        "slowest_speedup": round4(min(speedups)) if speedups else None,
        "tokens_per_pass": round4(ratio(tokens, passes)) if passes else None,
        "acceptance_rate": round4(ratio(sum(r["accepted"] or 0 for r in runs), drafted)) if drafted else None,
        "identical_to_plain": round4(sum(identical) / len(identical)) if greedy and identical else None,
        "ttft_s": round4(statistics.fmean(ttfts)) if ttfts else None,
        "draft_prefill_s": round4(statistics.fmean(draft_prefills)) if draft_prefills else None,
        "mean_new_tokens": round4(tokens / len(runs)) if runs else None,
        "total_new_tokens": tokens,
        "total_decode_s": round4(seconds),
    }


def markdown_table(report: dict) -> str:
    config = report["config"]
    lines = [
        f"# specrag bench: {Path(config['questions_file']).name}, {config['questions']} questions",
        "",
        f"max_new_tokens {config['max_new_tokens']}, temperature {config['temperature']}, "
        f"{config['device']}, numeric path {config.get('quant', '-')}, {config['torch_threads']} threads, "
        f"{config.get('cpu', '')}, {config['date']}",
        "",
        "| method | tok/s | speedup | slowest | tokens/pass | acceptance | identical_to_plain | TTFT s "
        "| draft prefill s | mean new tokens |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for method, s in report["summary"].items():
        lines.append(
            f"| {method} | {fmt(s['tokens_per_s'])} | {fmt(s['speedup'], 'x')} | {fmt(s['slowest_speedup'], 'x')} | "
            f"{fmt(s['tokens_per_pass'])} | {fmt(s['acceptance_rate'])} | "
            f"{fmt(s['identical_to_plain'])} | {fmt(s['ttft_s'])} | {fmt(s.get('draft_prefill_s'))} | "
            f"{fmt(s['mean_new_tokens'], '', 1)} |"
        )
    return "\n".join([*lines, "", report["speedup_definition"], ""])


def write_results(path: Path, report: dict) -> str:
    """Write the JSON and the markdown table beside it, each atomically; return the table."""
    table = markdown_table(report)
    write_atomic(path, json.dumps(report, indent=1))
    write_atomic(path.with_suffix(".md"), table)
    return table


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def round4(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


def fmt(value: float | None, suffix: str = "", digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"
