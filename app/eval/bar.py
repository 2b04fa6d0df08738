"""The answer-quality bar of an eval run, per split: `python -m app.eval.bar DIR [MORE ...]`.

Rows are split as the gate calibration splits them (app/copilot/gate_calibration.split_of:
a hash of the id), so figures on the held-out half are what new questions should give when
only the development half was used for tuning. Per split (and for all rows):
- unanswerable abstained: share of unanswerable questions whose answer abstains (gated or not);
- answerable refused: share of answerable questions whose answer abstains;
- keyword recall: mean over answerable questions;
- cited: share of non-abstaining answers with at least one valid [n] marker;
- commands grounded: found / listed commands, options, paths and code items, pooled; of them,
  adapted (a source's command with the user's own values) and assembled (one source's words put
  together, written so in no source) and with examples (a source's example value kept where the
  question names its own: example_values.py);
- specifics flagged: names, numbers, contacts and quantities not found in the passages;
- hit@5, MRR: means over answerable questions (retrieval).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.copilot.gate_calibration import split_of
from app.eval.results import read_results

COMMAND_KINDS = ("code", "command", "option", "path")


def bar(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r.get("status") == "ok"]
    answerable = [r for r in ok if not r.get("unanswerable")]
    unanswerable = [r for r in ok if r.get("unanswerable")]
    answered = [r for r in ok if "answer" in r]
    speaking = [r for r in answered if not _abstained(r)]
    found, listed, adapted, flagged, attributed, misattributed = 0, 0, 0, 0, 0, 0
    quotes, misquoted, recited, assembled, examples = 0, 0, 0, 0, 0
    for row in speaking:
        grounding = row["answer"]["grounding"]
        attributed += grounding.get("attributed", 0)  # rows written before session 20 have none
        misattributed += len(grounding.get("misattributed", ()))
        quotes += grounding.get("quotes_attributed", 0)  # rows written before session 21 have none
        misquoted += len(grounding.get("misquoted", ()))
        recited += len(grounding.get("recited", ()))  # rows written before session 22 have none
        assembled += len(grounding.get("assembled", ()))  # rows written before session 23 have none
        examples += len(grounding.get("examples", ()))  # rows written before session 40 have none
        # rows written before specifics were checked have no by_kind: every item was a command kind
        kinds = grounding.get("by_kind") or {"command": {"items": grounding["items"], "found": grounding["found"]}}
        for kind, counts in kinds.items():
            if kind in COMMAND_KINDS:
                found, listed = found + counts["found"], listed + counts["items"]
                adapted += counts.get("adapted", 0)  # rows written before session 8 have none
            else:
                flagged += counts["items"] - counts["found"]
    return {
        "questions": len(ok),
        "unanswerable_abstained": _share([_abstained(r) for r in unanswerable if "answer" in r]),
        "answerable_refused": _share([_abstained(r) for r in answerable if "answer" in r]),
        "keyword_recall": _mean([r["answer"].get("keyword_recall") for r in answerable if "answer" in r]),
        "cited": _share([bool(r["answer"]["citations"]["cited"]) for r in speaking]),
        "commands_grounded": f"{found}/{listed}" + (f" ({found / listed:.2f})" if listed else ""),
        "commands_adapted": adapted,  # of the grounded: with the user's own values in a source's command
        "commands_assembled": assembled,  # of the grounded: one source's words, written so in no source
        "commands_with_examples": examples,  # of the grounded: a source's example value kept for the user's own
        "specifics_flagged": flagged,
        # of the copied items whose sentence cites a source, those that source holds
        "cited_source_holds": f"{attributed - misattributed}/{attributed}"
        + (f" ({(attributed - misattributed) / attributed:.2f})" if attributed else ""),
        # of the prose quotes whose sentence cites a source, those that source holds
        "cited_source_quoted": f"{quotes - misquoted}/{quotes}"
        + (f" ({(quotes - misquoted) / quotes:.2f})" if quotes else ""),
        # sentences shown citing the source they quote, not the model's [n] (counted as held above)
        "citations_corrected": recited,
        # answers shown with what their sources say the options they use mean (definitions.py)
        # (of the answers recording them: rows written before session 25 have none)
        "answers_with_definitions": _share(
            [bool(r["answer"]["definitions"]) for r in speaking if "definitions" in r["answer"]]
        ),
        # answers quoting what a source says of an entry they never name: its neighbour's words (neighbour_quotes.py)
        "neighbour_quotes": sum(bool(r["answer"].get("neighbour_quotes")) for r in speaking),
        # answers with a sentence joining two items of one source (splices.py)
        "spliced": sum(bool(r["answer"].get("spliced")) for r in speaking),
        # answers telling a source's sentence of another setting than the source's (swapped.py)
        "swapped": sum(bool(r["answer"].get("swapped")) for r in speaking),
        "hit@5": _mean([_metric(r, "hit@5") for r in answerable]),
        "mrr": _mean([_metric(r, "mrr") for r in answerable]),
    }


def by_split(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "dev": bar([r for r in rows if split_of(str(r["id"])) == "dev"]),
        "held-out": bar([r for r in rows if split_of(str(r["id"])) == "held-out"]),
        "all": bar(rows),
    }


def markdown(table: dict[str, dict[str, Any]]) -> str:
    columns = list(next(iter(table.values())))
    lines = ["| split | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for split, figures in table.items():
        lines.append(f"| {split} | " + " | ".join(_fmt(figures[c]) for c in columns) + " |")
    return "\n".join(lines)


def _abstained(row: dict[str, Any]) -> bool:
    return bool((row.get("abstention") or {}).get("abstained"))


def _metric(row: dict[str, Any], name: str) -> float | None:
    metrics = (row.get("retrieval") or {}).get("metrics") or {}
    return metrics.get(name)


def _share(values: list[bool]) -> str | None:
    return f"{sum(values)}/{len(values)} ({sum(values) / len(values):.2f})" if values else None


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 3) if present else None


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.eval.bar", description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="an eval's --out directory or its results.jsonl")
    args = parser.parse_args(argv)
    rows = [row for path in args.results for row in read_results(path)]
    print(markdown(by_split(rows)))
    return 0


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.eval.bar", main))
