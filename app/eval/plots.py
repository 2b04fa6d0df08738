"""The report's PNG plots (matplotlib, Agg backend: no display needed).

speedup.png: decode speedup over plain decoding per question (needs --compare-plain);
passes_vs_copied.png: tokens per target pass against the share of tokens copied from the
passages; latency.png: distribution of time to first token and total time; hit_at_k.png:
mean hit@k for k = 1..10.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.eval.metrics import KS


def write_plots(folder: Path, rows: Sequence[dict[str, Any]], summary: dict[str, Any]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    ok = [r for r in rows if r.get("status") == "ok"]
    drawers = {
        "speedup": _speedup,
        "passes_vs_copied": _passes_vs_copied,
        "latency": _latency,
        "hit_at_k": lambda ax, rows: _hit_at_k(ax, summary["hit_at_k"]),
    }
    written = {}
    for name, draw in drawers.items():
        figure, ax = plt.subplots(figsize=(7, 4))
        try:
            draw(ax, ok)
            figure.tight_layout()
            path = folder / f"{name}.png"
            figure.savefig(path, dpi=100)
            written[name] = str(path)
        finally:
            plt.close(figure)
    return written


def _no_data(ax: Any, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _speedup(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    pairs = [(r["id"], r["plain"]["speedup"]) for r in rows if (r.get("plain") or {}).get("speedup")]
    ax.set_title("Decode speedup over plain decoding per question")
    if not pairs:
        return _no_data(ax, "no plain-decoding comparison (run with --compare-plain)")
    ax.bar(range(len(pairs)), [s for _, s in pairs], color="tab:blue")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(pairs)), [str(i) for i, _ in pairs], rotation=60, fontsize=7)
    ax.set_ylabel("speculative / plain decode tok/s")


def _passes_vs_copied(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    points = [
        (r["speed"]["copied_share"], r["speed"]["tokens_per_pass"])
        for r in rows
        if r.get("speed") and r["speed"].get("tokens_per_pass") is not None
    ]
    ax.set_title("Tokens per target pass against share copied from the passages")
    if not points:
        return _no_data(ax, "no answers")
    ax.scatter([p[0] for p in points], [p[1] for p in points], color="tab:green")
    ax.set_xlabel("share of answer tokens copied")
    ax.set_ylabel("tokens per target pass")


def _latency(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    totals = [r["speed"]["total_s"] for r in rows if r.get("speed") and r["speed"].get("total_s") is not None]
    firsts = [r["speed"]["ttft_s"] for r in rows if r.get("speed") and r["speed"].get("ttft_s") is not None]
    ax.set_title("Latency distribution")
    if not totals:
        return _no_data(ax, "no answers")
    ax.hist([firsts, totals], bins=min(20, max(3, len(totals))), label=["time to first token", "total"])
    ax.set_xlabel("seconds")
    ax.set_ylabel("questions")
    ax.legend()


def _hit_at_k(ax: Any, curve: dict[int, float | None]) -> None:
    points = [(k, curve.get(k)) for k in KS if curve.get(k) is not None]
    ax.set_title("hit@k")
    if not points:
        return _no_data(ax, "no questions with gold sources")
    ax.plot([k for k, _ in points], [v for _, v in points], marker="o")
    ax.set_xticks(list(KS))
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("k (passages)")
    ax.set_ylabel("mean hit@k")
