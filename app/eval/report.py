"""DIR/report.md, DIR/report.json and DIR/plots/*.png from the rows of results.jsonl.

Every metric is summarised by its mean, median and count over the questions that have it
(an unanswerable question has no retrieval metrics, a row without references no F1).
Decode speedup is also given as a geometric mean (as `specrag bench` reports it). The
"answer score" that ranks the worst answers is the mean of a row's keyword recall, token
F1 and abstention correctness (whichever exist). Plots use matplotlib's Agg backend and
are always written; a plot without data says so on its canvas.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.eval.metrics import KS
from core.atomic import write_atomic

Getter = Callable[[dict[str, Any]], Any]


def _at(*keys: str) -> Getter:
    def get(row: dict[str, Any]) -> Any:
        value: Any = row
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return float(value) if isinstance(value, bool | int | float) else None

    return get


HEADLINE: dict[str, Getter] = {
    "hit@1": _at("retrieval", "metrics", "hit@1"),
    "hit@5": _at("retrieval", "metrics", "hit@5"),
    "hit@10": _at("retrieval", "metrics", "hit@10"),
    "recall@5": _at("retrieval", "metrics", "recall@5"),
    "mrr": _at("retrieval", "metrics", "mrr"),
    "ndcg@5": _at("retrieval", "metrics", "ndcg@5"),
    "ndcg@10": _at("retrieval", "metrics", "ndcg@10"),
    "keyword_recall": _at("answer", "keyword_recall"),
    "exact_match": _at("answer", "exact_match"),
    "token_f1": _at("answer", "f1"),
    "reference_contained": _at("answer", "reference_contained"),
    "abstention_correct": _at("abstention", "correct"),
    "citations_valid": _at("answer", "citations", "valid"),
    "grounding_share": _at("answer", "grounding", "share"),
    "ttft_s": _at("speed", "ttft_s"),
    "total_s": _at("speed", "total_s"),
    "decode_tok_per_s": _at("speed", "decode_tokens_per_s"),
    "tokens_per_pass": _at("speed", "tokens_per_pass"),
    "copied_share": _at("speed", "copied_share"),
    "acceptance_ngram": _at("speed", "acceptance", "ngram"),
    "acceptance_model": _at("speed", "acceptance", "model"),
    "plain_decode_tok_per_s": _at("plain", "speed", "decode_tokens_per_s"),
    "speedup": _at("plain", "speedup"),
    "speedup_total": _at("plain", "speedup_total"),
    "identical_to_plain": _at("plain", "identical"),
}
PER_KIND = ("hit@5", "mrr", "keyword_recall", "token_f1", "abstention_correct", "decode_tok_per_s", "speedup")


def summarize(rows: Sequence[dict[str, Any]], config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report as a dict (report.json): headline stats, per-kind means, hit@k curve, worst questions."""
    ok = [r for r in rows if r.get("status") == "ok"]
    kinds = sorted({r.get("kind") or "-" for r in ok})
    return {
        "config": config or {},
        "questions": len(rows),
        "errors": [{"id": r["id"], "error": r.get("error")} for r in rows if r.get("status") != "ok"],
        "metrics": {name: describe([get(r) for r in ok]) for name, get in HEADLINE.items()},
        "speedup_geomean": geomean([HEADLINE["speedup"](r) for r in ok]),
        "by_kind": {kind: by_kind(ok, kind) for kind in kinds},
        "hit_at_k": {k: describe([_at("retrieval", "metrics", f"hit@{k}")(r) for r in ok])["mean"] for k in KS},
        "worst_retrieval": [_brief(r) for r in worst(ok, retrieval_score)],
        "worst_answers": [_brief(r) for r in worst(ok, answer_score)],
    }


def by_kind(rows: Sequence[dict[str, Any]], kind: str) -> dict[str, Any]:
    """Question count and the mean of each PER_KIND metric over the rows of one kind ("-": no kind)."""
    subset = [r for r in rows if (r.get("kind") or "-") == kind]
    return {"questions": len(subset)} | {
        name: describe([HEADLINE[name](r) for r in subset])["mean"] for name in PER_KIND
    }


def describe(values: Sequence[float | None]) -> dict[str, Any]:
    present = [v for v in values if v is not None]
    if not present:
        return {"mean": None, "median": None, "n": 0}
    return {
        "mean": round(statistics.fmean(present), 4),
        "median": round(statistics.median(present), 4),
        "n": len(present),
    }


def geomean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None and v > 0]
    return round(math.exp(statistics.fmean(math.log(v) for v in present)), 4) if present else None


def retrieval_score(row: dict[str, Any]) -> float | None:
    mrr, ndcg = _at("retrieval", "metrics", "mrr")(row), _at("retrieval", "metrics", "ndcg@10")(row)
    return None if mrr is None else (mrr + (ndcg or 0.0)) / 2


def answer_score(row: dict[str, Any]) -> float | None:
    parts = [HEADLINE[n](row) for n in ("keyword_recall", "token_f1", "abstention_correct")]
    present = [p for p in parts if p is not None]
    return statistics.fmean(present) if present else None


def worst(rows: Sequence[dict[str, Any]], score: Callable[[dict[str, Any]], float | None], n: int = 5) -> list[dict]:
    scored = [(s, r) for r in rows if (s := score(r)) is not None]
    return [dict(r, score=round(s, 4)) for s, r in sorted(scored, key=lambda pair: pair[0])[:n]]


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    retrieval = row.get("retrieval") or {}
    return {
        "id": row["id"],
        "kind": row.get("kind"),
        "question": row.get("question"),
        "score": row.get("score"),
        "top_sources": [s["path"] for s in (retrieval.get("sources") or [])[:3]],
        "metrics": {n: HEADLINE[n](row) for n in ("hit@5", "mrr", "keyword_recall", "token_f1", "abstention_correct")},
        "answer": (row.get("answer") or {}).get("text"),
    }


def write_report(out: Path, rows: Sequence[dict[str, Any]], config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write report.json, report.md and the plots under `out`; return the summary."""
    from app.eval.plots import write_plots

    summary = summarize(rows, config)
    summary["plots"] = write_plots(out / "plots", rows, summary)
    write_atomic(out / "report.json", json.dumps(summary, indent=1, default=str) + "\n")
    write_atomic(out / "report.md", markdown(summary))
    return summary


def markdown(summary: dict[str, Any]) -> str:
    lines = ["# specrag eval report", ""]
    config = summary.get("config") or {}
    if config:
        lines += [f"Questions file `{config.get('questions')}`, " + _config_line(config), ""]
    lines += [f"{summary['questions']} questions, {len(summary['errors'])} errors.", ""]
    lines += headline_table(summary)
    lines += ["", "## By kind", "", "| kind | questions | " + " | ".join(PER_KIND) + " |"]
    lines += ["|---" * (len(PER_KIND) + 2) + "|"]
    for kind, stats in summary["by_kind"].items():
        lines.append(f"| {kind} | {stats['questions']} | " + " | ".join(_fmt(stats[n]) for n in PER_KIND) + " |")
    lines += ["", "## hit@k", "", "| k | " + " | ".join(str(k) for k in KS) + " |", "|---" * (len(KS) + 1) + "|"]
    lines.append("| hit@k | " + " | ".join(_fmt(v) for v in summary["hit_at_k"].values()) + " |")
    for title, key in (("Worst retrieval", "worst_retrieval"), ("Worst answers", "worst_answers")):
        lines += ["", f"## {title}", ""]
        lines += [_worst_entry(item) for item in summary[key]] or ["(none scored)"]
    lines += ["", "## Plots", ""] + [f"![{name}](plots/{Path(p).name})" for name, p in summary.get("plots", {}).items()]
    for error in summary["errors"]:
        lines.append(f"- error on {error['id']}: {error['error']}")
    return "\n".join(lines) + "\n"


def headline_table(summary: dict[str, Any]) -> list[str]:
    lines = ["## Headline", "", "| metric | mean | median | n |", "|---|---|---|---|"]
    for name, stats in summary["metrics"].items():
        if stats["n"]:
            lines.append(f"| {name} | {_fmt(stats['mean'])} | {_fmt(stats['median'])} | {stats['n']} |")
    if summary.get("speedup_geomean") is not None:
        lines.append(f"| speedup (geometric mean) | {_fmt(summary['speedup_geomean'])} | | |")
    return lines


def summary_line(summary: dict[str, Any], out: Path) -> str:
    m = summary["metrics"]
    parts = [f"{summary['questions']} questions ({len(summary['errors'])} errors)"]
    for name in ("hit@5", "mrr", "keyword_recall", "token_f1", "abstention_correct", "decode_tok_per_s"):
        if m[name]["n"]:
            parts.append(f"{name} {_fmt(m[name]['mean'])}")
    if summary.get("speedup_geomean") is not None:
        parts.append(f"speedup {summary['speedup_geomean']:.2f}x, identical {_fmt(m['identical_to_plain']['mean'])}")
    return "specrag eval: " + ", ".join(parts) + f" -> {out / 'report.md'}"


def _worst_entry(item: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {_fmt(v)}" for k, v in item["metrics"].items() if v is not None)
    answer = (item.get("answer") or "(no answer)").strip().replace("\n", " ")
    answer = answer if len(answer) <= 400 else answer[:400] + "…"
    sources = ", ".join(Path(s).name for s in item["top_sources"]) or "(given passages)"
    return f"- **{item['id']}** ({shown}; top sources: {sources}): {item['question']}\n  > {answer}"


def _config_line(config: dict[str, Any]) -> str:
    keys = ("target", "draft", "speculation", "passages", "temperature", "max_new_tokens", "compare_plain")
    keys += ("code_from_sources", "withhold_uncited", "retrieval_only", "index", "limit")
    return ", ".join(f"{k} {config[k]}" for k in keys if k in config) + "."


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
