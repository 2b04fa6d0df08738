"""Are llama.cpp's verification passes row invariant? The probe behind the speed issue's GGUF-runner lead.

    python -m app.bench_llamacpp_rows [--gguf FILE] [--context 500] [--no-repack] [--flash-attn] [--kv f16|bf16|q8_0]

Decodes `--context` tokens of text (its prefill timed), then the next 16 tokens one at a time, then the same
tokens again in one pass of W rows for each width W (the KV cache cropped back in between).
Prints, per W, the pass's seconds, how far its rows' logits are from the one-at-a-time ones
and from the widest pass's, and which other widths gave the same rows bit for bit: a runner
whose rows depend on the pass width cannot verify drafts exactly unless every pass is padded
to a width whose rows agree. Needs the `bench` extra (llama-cpp-python).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.bench_llamacpp import check_available
from app.copilot.options import ModelOptions
from core.errors import SpecragError
from generation.model_store import gguf_file

WIDTHS = (2, 3, 4, 5, 6, 7, 8, 9, 12, 16)
KV_TYPES = {"f16": 1, "bf16": 30, "q8_0": 8}  # ggml.h type ids of the KV cache (llama.cpp's default: f16)
TOKENS = max(WIDTHS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.bench_llamacpp_rows", description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", help="target GGUF file (default: the packaged default target's)")
    parser.add_argument("--context", type=int, default=500, help="tokens decoded before the probe (default 500)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-repack", action="store_true", help="keep llama.cpp from repacking the weights")
    parser.add_argument("--flash-attn", action="store_true", help="llama.cpp's flash attention")
    parser.add_argument("--kv", choices=KV_TYPES, default="f16", help="KV cache type (default f16, llama.cpp's)")
    args = parser.parse_args(argv)
    gguf = Path(args.gguf) if args.gguf else gguf_file(ModelOptions().target)
    if gguf is None:
        raise SpecragError("no GGUF file for the target: pass --gguf FILE")
    check_available(gguf)
    llm = load(gguf, args.threads, not args.no_repack, args.flash_attn, args.context + TOKENS, KV_TYPES[args.kv])
    ids = llm.tokenize(Path(__file__).with_name("bench.py").read_text().encode() * 4)
    if len(ids) < args.context + TOKENS:
        raise SpecragError(f"--context {args.context} is longer than the probe's text: use at most {len(ids) - TOKENS}")
    prefill_s, rows = probe(llm, ids[: args.context], ids[args.context : args.context + TOKENS])
    print(
        f"{gguf.name}, {args.threads} threads, repack {'off' if args.no_repack else 'on'}, "
        f"flash attention {'on' if args.flash_attn else 'off'}, {args.kv} KV cache, after {args.context} tokens "
        f"(prefilled in {prefill_s:.2f} s)"
    )
    print(
        "| W | pass s | max logit diff vs one at a time | vs the widest pass | argmax as one at a time | "
        "bit-identical to the passes of W = |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for row in rows:
        print(
            f"| {row['width']} | {row['seconds']:.3f} | {row['vs_single']:.3g} | {row['vs_widest']:.3g} | "
            f"{row['argmax_agrees']:.2f} | {', '.join(map(str, row['identical_to'])) or '-'} |"
        )
    return 0


def load(gguf: Path, threads: int, repack: bool, flash_attn: bool, context: int, kv_type: int = 1) -> Any:
    import llama_cpp
    from llama_cpp import llama_cpp as bindings  # the Llama class reads its model parameters from here

    params = bindings.llama_model_default_params
    if not repack:

        def without_repacking() -> Any:
            defaults = params()
            defaults.use_extra_bufts = False
            return defaults

        bindings.llama_model_default_params = without_repacking
    try:
        return llama_cpp.Llama(
            model_path=str(gguf),
            n_ctx=context,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=True,
            flash_attn=flash_attn,
            type_k=kv_type,
            type_v=kv_type,
            verbose=False,
        )
    finally:
        bindings.llama_model_default_params = params


def probe(llm: Any, context: list[int], tokens: list[int]) -> tuple[float, list[dict]]:
    """The context's prefill seconds; per width W (1: one token at a time): seconds of a pass, and how its rows
    compare with the other widths'."""
    n = len(context)
    llm.reset()
    start = time.perf_counter()
    llm.eval(context)
    prefill_s = time.perf_counter() - start
    start = time.perf_counter()
    for token in tokens:
        llm.eval([token])
    single_s = (time.perf_counter() - start) / len(tokens)
    single = np.array(llm.scores[n : n + len(tokens)])
    logits, seconds = {1: single}, {1: single_s}
    for width in WIDTHS:
        llm.n_tokens = n  # eval crops the KV cache back to here
        start = time.perf_counter()
        llm.eval(tokens[:width])
        seconds[width] = time.perf_counter() - start
        logits[width] = np.array(llm.scores[n : n + width])
    widest = logits[max(WIDTHS)]
    report = []
    for width, rows in logits.items():
        agrees = float((rows.argmax(1) == single[: len(rows)].argmax(1)).mean())
        # widths whose passes gave these same tokens bit-identical logits (on the rows both have)
        same = [other for other in logits if other != width and diff(rows, logits[other]) == 0.0]
        report.append(
            dict(
                width=width,
                seconds=seconds[width],
                vs_single=diff(rows, single),
                vs_widest=diff(rows, widest),
                argmax_agrees=agrees,
                identical_to=same,
            )
        )
    return prefill_s, report


def diff(a: np.ndarray, b: np.ndarray) -> float:
    rows = min(len(a), len(b))
    return float(np.abs(a[:rows] - b[:rows]).max())


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.bench_llamacpp_rows", main))
