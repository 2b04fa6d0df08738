"""Are llama.cpp's verification passes row invariant? The probe behind the speed issue's GGUF-runner lead.

    python -m app.bench_llamacpp_rows [--gguf FILE] [--context 500] [--no-repack] [--flash-attn] [--kv f16|bf16|q8_0]
                                      [--pad 1,4,8]

Decodes `--context` tokens of text (its prefill timed), then the next 16 tokens one at a time, then the same
tokens again in one pass of W rows for each width W (the KV cache cropped back in between).
Prints, per W, the pass's seconds, how far its rows' logits are from the one-at-a-time ones
and from the widest pass's, and which other widths gave the same rows bit for bit: a runner
whose rows depend on the pass width cannot verify drafts exactly unless every pass is padded
to a width whose rows agree. `--pad` checks that: the same 16 tokens are fed in several chunkings,
each chunk padded to a multiple of each given width and the padding cropped from the KV cache, and
each chunking's logits are compared with one token per (padded) pass.
Needs the `bench` extra (llama-cpp-python).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.bench_llamacpp import check_available, open_llama
from app.copilot.options import ModelOptions
from core.errors import SpecragError
from generation.model_store import gguf_file

WIDTHS = (2, 3, 4, 5, 6, 7, 8, 9, 12, 16)
CHUNKINGS = ((4, 4, 4, 4), (3, 5, 2, 6), (7, 7, 2), (8, 8), (16,))  # ways to feed the 16 probe tokens
PAD_TOKEN = 0
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
    parser.add_argument("--pad", help="comma list of widths: pad every pass to a multiple of each, compare chunkings")
    args = parser.parse_args(argv)
    gguf = Path(args.gguf) if args.gguf else gguf_file(ModelOptions().target)
    if gguf is None:
        raise SpecragError("no GGUF file for the target: pass --gguf FILE")
    check_available(gguf)
    multiples = pad_widths(args.pad) if args.pad else []
    room = args.context + TOKENS + max(multiples, default=0)  # a padded pass runs past the probe's tokens
    llm = load(gguf, args.threads, not args.no_repack, args.flash_attn, room, KV_TYPES[args.kv])
    ids = llm.tokenize(Path(__file__).with_name("bench.py").read_text().encode() * 4)
    if len(ids) < args.context + TOKENS:
        raise SpecragError(f"--context {args.context} is longer than the probe's text: use at most {len(ids) - TOKENS}")
    prefill_s, rows = probe(llm, ids[: args.context], ids[args.context : args.context + TOKENS])
    print(
        f"{gguf.name}, {args.threads} threads, repack {'off' if args.no_repack else 'on'}, "
        f"flash attention {'on' if args.flash_attn else 'off'}, {args.kv} KV cache, after {args.context} tokens "
        f"(prefilled in {prefill_s:.2f} s)"
    )
    if multiples:
        padded(llm, ids[: args.context], ids[args.context : args.context + TOKENS], multiples)
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
    return open_llama(
        gguf, threads, context, repack, logits_all=True, flash_attn=flash_attn, type_k=kv_type, type_v=kv_type
    )


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


def pad_widths(text: str) -> list[int]:
    try:
        widths = [int(w) for w in text.split(",")]
    except ValueError:
        widths = []
    if not widths or not all(1 <= w <= 64 for w in widths):
        raise SpecragError(f"--pad takes a comma list of widths from 1 to 64, such as 1,4,8; not {text!r}")
    return widths


def padded(llm: Any, context: list[int], tokens: list[int], multiples: list[int]) -> None:
    """Print, per padding width, each chunking's largest logit difference from one token per padded pass."""
    llm.reset()
    llm.eval(context)
    print("| padded to a multiple of | " + " | ".join(",".join(map(str, c)) for c in CHUNKINGS) + " |")
    print("| ---: |" + " ---: |" * len(CHUNKINGS))
    for multiple in multiples:
        one_by_one = fed(llm, len(context), tokens, (1,) * len(tokens), multiple)
        cells = [f"{diff(fed(llm, len(context), tokens, c, multiple), one_by_one):.3g}" for c in CHUNKINGS]
        print(f"| {multiple} | " + " | ".join(cells) + " |")


def fed(llm: Any, start: int, tokens: list[int], chunks: tuple[int, ...], multiple: int) -> np.ndarray:
    """The logits of `tokens` fed after `start` cached tokens in passes of `chunks` tokens, each padded to a
    multiple of `multiple` rows; the padding is cropped from the KV cache before the next pass."""
    rows, at = [], start
    for size in chunks:
        chunk = tokens[at - start : at - start + size]
        llm.n_tokens = at  # eval crops the KV cache back to here
        llm.eval(chunk + [PAD_TOKEN] * (-len(chunk) % multiple))
        rows.append(np.array(llm.scores[at : at + size]))
        at += size
    return np.concatenate(rows)


def diff(a: np.ndarray, b: np.ndarray) -> float:
    rows = min(len(a), len(b))
    return float(np.abs(a[:rows] - b[:rows]).max())


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.bench_llamacpp_rows", main))
