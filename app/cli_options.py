"""Command-line flags shared by the front ends, and their conversion to typed options.

Every command that answers questions (ask, chat, slack, eval, bench) takes the same
model, index and answer flags; only this module reads them off an argparse.Namespace.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.copilot.gate import GATE_MODES
from app.copilot.options import DEFAULT_PASSAGES, SPECULATION_MODES, AnswerOptions, CopilotOptions, ModelOptions
from generation.path_names import PATHS


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        default="default-target",
        metavar="NAME_OR_PATH",
        help="target model: default-target, a .gguf file (run on llama.cpp), a local HF model folder or a hub id",
    )
    parser.add_argument(
        "--draft",
        default="default-draft",
        metavar="NAME_OR_PATH|none",
        help="draft model: default-draft, a .gguf file, a folder, a hub id, or none",
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
        choices=PATHS,
        help="numeric path: llamacpp (the GGUF on llama.cpp, row-invariant, speculative), llamacpp-f16 (f16 KV "
        "cache: faster prefill, plain decoding), int4/int8 weight-only torch kernels (int4-mlas: int4 on ONNX "
        "Runtime's kernels, needs the mlas extra), or none (float weights); default auto: the fastest measured on "
        "this CPU unless --dtype is given; float32 is --dtype float32",
    )


def add_index_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index",
        type=Path,
        default=None,
        help="index directory (default: $SPECRAG_HOME/index or ~/.cache/specrag/index)",
    )


def add_sampling_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for sampling (default 0)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="answer length limit (default 256)")


def add_answer_args(parser: argparse.ArgumentParser) -> None:
    """Sampling, passages and speculation flags for commands that answer questions."""
    add_sampling_args(parser)
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (default 1.0: off)")
    parser.add_argument("--top-k", type=int, default=0, help="sample from the k best tokens only (default 0: off)")
    parser.add_argument(
        "-k",
        "--passages",
        type=int,
        default=DEFAULT_PASSAGES,
        help=f"how many retrieved passages go into the prompt (default {DEFAULT_PASSAGES})",
    )
    parser.add_argument(
        "--speculation",
        choices=SPECULATION_MODES,
        default="hybrid",
        help="how drafts are proposed (default hybrid: copy from the passages, else the draft model)",
    )
    parser.add_argument("--no-speculation", action="store_true", help="plain target decoding (= --speculation none)")
    parser.add_argument("--stop", action="append", default=[], metavar="STR", help="stop at this string (repeatable)")
    parser.add_argument(
        "--gate",
        choices=GATE_MODES,
        default="refuse",
        help="relevance gate when the retrieved passages do not match the question: refuse (default: say so and "
        "list the nearest sources), warn (answer anyway, flagged) or off",
    )
    parser.add_argument(
        "--repeat-span",
        type=int,
        default=AnswerOptions.repeat_span,
        metavar="N",
        help=f"stop an answer caught in a loop, when a run of N tokens comes round a third time "
        f"(any numeral matching any other; default {AnswerOptions.repeat_span}; 0: off)",
    )
    parser.add_argument(
        "--free-code",
        action="store_true",
        help="let the model write commands, options and code spans no passage holds (default: decoding keeps "
        "them to what the grounding check finds in the passages; copied_code.py)",
    )
    parser.add_argument(
        "--show-uncited",
        action="store_true",
        help="show answers that cite none of their passages or write the prompt's [n] placeholder as a value "
        "(default: withhold them with a notice, since the prompt asks for [n] citations and an uncited answer may "
        "come from general knowledge; withhold.py)",
    )


def model_options(args: argparse.Namespace) -> ModelOptions:
    draft = None if args.draft.lower() == "none" else args.draft
    return ModelOptions(args.target, draft, args.device, args.dtype, args.draft_int8, args.linear_layout, args.quant)


def answer_options(args: argparse.Namespace) -> AnswerOptions:
    return AnswerOptions(
        passages=args.passages,
        speculation="none" if args.no_speculation else args.speculation,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        stop=tuple(args.stop),
        gate=args.gate,
        repeat_span=args.repeat_span,
        code_from_sources=not args.free_code,
        withhold_uncited=not args.show_uncited,
    )


def add_copilot_args(parser: argparse.ArgumentParser) -> None:
    """The index, answer and model options every command that answers questions takes (copilot_options reads them)."""
    add_index_arg(parser)
    add_answer_args(parser)
    add_model_args(parser)


def copilot_options(args: argparse.Namespace) -> CopilotOptions:
    """Options for a command with model, index and answer flags (validated before any model loads)."""
    return CopilotOptions(models=model_options(args), index_dir=args.index, answer=answer_options(args))
