"""What one target pass over k tokens costs on this machine, for the numeric path chosen by the flags.

    python -m app.bench_passes [--quant auto|int4|int8|none] [--dtype ...] [--context 600]

Prints a markdown row: seconds per pass for k = 1, 2, 3, 4, 8, 16 new tokens after a context
of random tokens (fastest of 3 interleaved runs), and the prefill of that context. Run it once
per path to compare them; the drafting policy reads the same curve from its calibration.
"""

from __future__ import annotations

import argparse
import sys

from app.cli_options import add_model_args, model_options
from app.copilot import Copilot, CopilotOptions
from core.hardware import cpu_name

SIZES = (1, 2, 3, 4, 8, 16)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.bench_passes", description=__doc__.split("\n")[0])
    parser.add_argument("--context", type=int, default=600, help="tokens in the cache before each pass (default 600)")
    add_model_args(parser)
    args = parser.parse_args(argv)
    args.draft = "none"
    loaded = Copilot.load(CopilotOptions(models=model_options(args))).loaded
    passes, prefill = loaded.engine.pass_seconds(SIZES, args.context)
    print(f"{cpu_name()}, numeric path {loaded.quant}, after {args.context} tokens (seconds)")
    print("| path | " + " | ".join(f"k={k}" for k in SIZES) + f" | prefill {args.context} |")
    print("| --- |" + " ---: |" * (len(SIZES) + 1))
    print(f"| {loaded.quant} | " + " | ".join(f"{passes[k]:.3g}" for k in SIZES) + f" | {prefill:.3g} |")
    return 0


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.bench_passes", main))
