"""Are llama.cpp's verification passes row invariant? The probe behind the speed issue's GGUF-runner lead.

    python -m app.bench_llamacpp_rows [--gguf FILE] [--context 500] [--no-repack] [--flash-attn]

Decodes `--context` tokens of text, then the next 16 tokens one at a time, then the same
tokens again in one pass of W rows for each width W (the KV cache cropped back in between).
Prints, per W, the pass's seconds and how far its rows' logits are from the one-at-a-time
ones and from the widest pass's: a runner whose rows depend on the pass width cannot verify
drafts exactly unless every pass is padded to a width whose rows agree. Needs the `bench`
extra (llama-cpp-python).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.bench_llamacpp import check_available
from app.copilot.loading import target_gguf
from app.copilot.options import ModelOptions
from core.errors import SpecragError

WIDTHS = (2, 3, 4, 5, 6, 7, 8, 9, 12, 16)
TOKENS = max(WIDTHS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.bench_llamacpp_rows", description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", help="target GGUF file (default: the packaged default target's)")
    parser.add_argument("--context", type=int, default=500, help="tokens decoded before the probe (default 500)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-repack", action="store_true", help="keep llama.cpp from repacking the weights")
    parser.add_argument("--flash-attn", action="store_true", help="llama.cpp's flash attention")
    args = parser.parse_args(argv)
    gguf = Path(args.gguf) if args.gguf else target_gguf(ModelOptions().target)
    if gguf is None:
        raise SpecragError("no GGUF file for the target: pass --gguf FILE")
    check_available(gguf)
    llm = load(gguf, args.threads, not args.no_repack, args.flash_attn, args.context + TOKENS)
    ids = llm.tokenize(Path(__file__).with_name("bench.py").read_text().encode() * 4)
    if len(ids) < args.context + TOKENS:
        raise SpecragError(f"--context {args.context} is longer than the probe's text: use at most {len(ids) - TOKENS}")
    rows = probe(llm, ids[: args.context], ids[args.context : args.context + TOKENS])
    print(
        f"{gguf.name}, {args.threads} threads, repack {'off' if args.no_repack else 'on'}, "
        f"flash attention {'on' if args.flash_attn else 'off'}, after {args.context} tokens"
    )
    print(
        "| W | pass s | max abs logit diff vs one at a time | vs the widest pass | argmax agrees with one at a time |"
    )
    print("| ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(
            f"| {row['width']} | {row['seconds']:.3f} | {row['vs_single']:.3g} | {row['vs_widest']:.3g} | "
            f"{row['argmax_agrees']:.2f} |"
        )
    return 0


def load(gguf: Path, threads: int, repack: bool, flash_attn: bool, context: int) -> Any:
    import llama_cpp

    params = llama_cpp.llama_model_default_params
    if not repack:  # the Llama class reads its model parameters from this function

        def without_repacking() -> Any:
            defaults = params()
            defaults.use_extra_bufts = False
            return defaults

        llama_cpp.llama_model_default_params = without_repacking
    try:
        return llama_cpp.Llama(
            model_path=str(gguf),
            n_ctx=context,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=True,
            flash_attn=flash_attn,
            verbose=False,
        )
    finally:
        llama_cpp.llama_model_default_params = params


def probe(llm: Any, context: list[int], tokens: list[int]) -> list[dict]:
    """Per width W: seconds of one W-row pass, and its rows' distance from single-row and widest-pass logits."""
    n = len(context)
    llm.reset()
    llm.eval(context)
    start = time.perf_counter()
    for token in tokens:
        llm.eval([token])
    single_s = (time.perf_counter() - start) / len(tokens)
    single = np.array(llm.scores[n : n + len(tokens)])
    passes = {}
    for width in WIDTHS:
        llm.n_tokens = n  # eval crops the KV cache back to here
        start = time.perf_counter()
        llm.eval(tokens[:width])
        passes[width] = (time.perf_counter() - start, np.array(llm.scores[n : n + width]))
    widest = passes[max(WIDTHS)][1]
    rows = [
        {"width": 1, "seconds": single_s, "vs_single": 0.0, "vs_widest": diff(single, widest), "argmax_agrees": 1.0}
    ]
    for width, (seconds, logits) in passes.items():
        agrees = float((logits.argmax(1) == single[:width].argmax(1)).mean())
        rows.append(
            {
                "width": width,
                "seconds": seconds,
                "vs_single": diff(logits, single),
                "vs_widest": diff(logits, widest),
                "argmax_agrees": agrees,
            }
        )
    return rows


def diff(a: np.ndarray, b: np.ndarray) -> float:
    rows = min(len(a), len(b))
    return float(np.abs(a[:rows] - b[:rows]).max())


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.bench_llamacpp_rows", main))
