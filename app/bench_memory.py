"""Peak resident memory of a command and every process it starts, against the weights it runs.

    python -m app.bench_memory [--weights FILE] -- specrag ask "How do I drain a node?"

`/usr/bin/time -v` reports the largest single process; `specrag ask` searches in a child process
(app/copilot/search_process.py), so that figure alone could hide memory held by two processes at
once. This samples the RSS of the command's whole process tree every `--interval` seconds and
reports the peak of the sum, the peak of the command's own process, and both as multiples of the
weights (by default the packaged target's GGUF, the weights of the default llama.cpp paths). The
command's stdout and stderr pass through. Sampling can miss a peak shorter than the interval.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from core.errors import SpecragError, run_reporting_errors


@dataclass(frozen=True)
class TreePeak:
    tree_bytes: int  # the largest sum of RSS over the command and its descendants at one sample
    top_bytes: int  # the largest RSS of the command's own process
    samples: int
    returncode: int


def sample_tree(command: list[str], interval: float = 0.05) -> TreePeak:
    """Run `command` to its end, sampling its process tree's RSS."""
    try:
        process = subprocess.Popen(command)
    except OSError as err:
        raise SpecragError(f"cannot run {command[0]}: {err.strerror}") from err
    top = psutil.Process(process.pid)
    tree = top_peak = samples = 0
    while process.poll() is None:
        try:
            rss = [p.memory_info().rss for p in (top, *top.children(recursive=True))]
            tree, top_peak, samples = max(tree, sum(rss)), max(top_peak, rss[0]), samples + 1
        except psutil.Error:  # a process ended between listing and reading it: take the next sample
            pass
        time.sleep(interval)
    return TreePeak(tree, top_peak, samples, process.wait())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, help="the weights file to compare with (default: the packaged target)")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between samples (default 0.05)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to measure, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    return run_reporting_errors("bench_memory", lambda: report(command, args.weights, args.interval))


def report(command: list[str], weights: Path | None, interval: float) -> int:
    if weights is None:
        from generation.model_store import gguf_file

        weights = gguf_file("default-target")
    if weights is None or not weights.is_file():
        raise SpecragError(f"no weights file at {weights}: pass --weights FILE")
    peak = sample_tree(command, interval)
    size = weights.stat().st_size
    print(
        f"peak RSS: whole process tree {peak.tree_bytes / 2**20:,.0f} MiB ({peak.tree_bytes / size:.2f}x), "
        f"command's own process {peak.top_bytes / 2**20:,.0f} MiB ({peak.top_bytes / size:.2f}x) "
        f"of {weights.name} ({size / 2**20:,.0f} MiB); {peak.samples} samples, exit status {peak.returncode}",
        file=sys.stderr,
    )
    return peak.returncode


if __name__ == "__main__":
    sys.exit(main())
