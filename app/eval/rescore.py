"""Score saved eval answers again with the current checks, without the model:
`python -m app.eval.rescore DIR/results.jsonl --questions QUESTIONS.jsonl --index DIR --out NEW.jsonl`.

Everything an eval row records about an answer past its text (what the user is shown, citations,
grounding, quotes, recitations, keyword recall, abstention) is computed from the text and its
passages. When those checks change, rerunning the model (~40 min for the 61 Slurm questions on a
2-core CPU) only reproduces the same text; this recomputes the rest through the pipeline's own
`final_from_text`, reading each passage from the index by the chunk id the row recorded.

A row is kept as it was, and counted, when its answer cannot be rescored faithfully: the gate
refused it (no model ran; only its scores against the expected answer are taken again, so a
refused answerable question says nothing, as `answer_record` scores it since session 23), or the
drafter copied tokens into it and the row predates `copied_spans` (its provenance is not saved,
and the checks would see those copies only as text). Since session 61 a row records where the
drafter's copies lie in its text, so an answer from a path that verifies drafts (`int4`, which
`auto` picks on an AMX Xeon) is rescored with its live provenance. A chunk the index no longer
holds is an error: rescore against the index the eval ran on. The output is written atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from app.copilot.citations import segments_of
from app.copilot.events import Passage
from app.copilot.pipeline import final_from_text
from app.copilot.tool_pages import ToolPages, read_tool_pages
from app.eval.metrics import option_forms
from app.eval.questions import Question, read_questions
from app.eval.results import read_results, results_file
from app.eval.runner import abstention_record, answer_record, content_scores
from core.atomic import write_atomic
from core.errors import SpecragError


def rescore_rows(
    rows: Sequence[dict[str, Any]],
    questions: dict[str, Question],
    chunk_text: Callable[[str], str | None],
    pages: ToolPages | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The rows with their answers scored again, and how many were kept as they were, by reason; `pages`, what the
    index's tool pages say (tool_pages.py), as the live checks read them."""
    out, kept = [], {"no answer": 0, "gated": 0, "drafted": 0}
    forms = option_forms(pages.options) if pages else {}
    for row in rows:
        answer = row.get("answer")
        reason = "no answer" if not answer else "gated" if answer["finish_reason"] == "gated" else ""
        copies = _copies(answer, row["id"]) if not reason else None
        if not reason and answer["citations"].get("copied") and copies is None:
            reason = "drafted"
        if reason:
            kept[reason] += 1
            if reason == "gated" and not row.get("unanswerable"):  # refused: it gives none of the answer
                row = row | {"answer": answer | content_scores("", _question(questions, row))}
            out.append(row)
            continue
        question = _question(questions, row)
        passages = [_passage(source, chunk_text, row["id"]) for source in row["retrieval"]["sources"]]
        finish, withheld = answer["finish_reason"], answer.get("withheld", "")
        final = final_from_text(
            question.question,
            passages[: answer["passages_in_prompt"]],
            answer["text"],
            finish,
            withheld,
            pages=pages,
            copies=copies,
        )
        out.append(
            row
            | {
                # the gate's reading is the eval's: rescoring runs no retrieval or model
                "answer": answer_record(final, question, forms) | {"relevance": answer.get("relevance")},
                "abstention": abstention_record(final.shown, question),
            }
        )
    return out, kept


def _copies(answer: dict[str, Any], row_id: object) -> tuple[list[list[int]], dict[int, int]] | None:
    """The drafter's copies a row recorded (spans in its text, tokens per passage), or None for a row from before
    they were recorded; spans that do not fit the row's text (an edited row) are an error."""
    citations = answer["citations"]
    if "copied_spans" not in citations:
        return None
    spans = citations["copied_spans"]
    try:  # the spans' own check, here rather than inside the checks, whose other ValueErrors are no edited row's
        segments_of(answer["text"], spans)
    except ValueError as err:
        raise SpecragError(
            f"row {row_id}: its copied spans do not fit an answer of {len(answer['text'])} characters ({err}); "
            "rescore the results file an eval wrote"
        ) from err
    return spans, {int(n): tokens for n, tokens in citations.get("copied", {}).items()}


def _question(questions: dict[str, Question], row: dict[str, Any]) -> Question:
    question = questions.get(str(row["id"]))
    if question is None:
        raise SpecragError(f"row {row['id']} is not in the questions file: pass the file the eval ran on")
    return question


def _passage(source: dict[str, Any], chunk_text: Callable[[str], str | None], row_id: object) -> Passage:
    text = chunk_text(source["chunk_id"])
    if text is None:
        raise SpecragError(
            f"row {row_id}: the index no longer holds chunk {source['chunk_id']} ({source['path']}): "
            "rescore against the index the eval ran on"
        )
    return Passage(
        source["rank"],
        text,
        source["path"],
        source["title"],
        source["heading"],
        source["score"],
        source["chunk_id"],
        entry=source.get("entry", ""),
    )


def live_chunks(index_dir: Path) -> list[Any]:
    """The chunks of the live generation of the index at `index_dir`."""
    from retrieval.index import load_rows as load_index_rows
    from retrieval.manifest import settings_of
    from retrieval.store import check_generation, pin_live

    with pin_live(index_dir) as lease:
        settings = settings_of(check_generation(lease.generation))
        chunks, _ = load_index_rows(lease.generation, settings.dim)
    return chunks


def chunk_texts(chunks: Sequence[Any]) -> Callable[[str], str | None]:
    """The passage text a saved chunk id names (a chunk's, or neighbours' joined: retrieval/neighbours.py)
    among `chunks` (an index's live generation: `live_chunks`); None when they no longer hold it."""
    from retrieval.neighbours import joined_text

    return partial(joined_text, chunks={chunk.chunk_id: chunk for chunk in chunks})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.eval.rescore", description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="an eval's --out directory or its results.jsonl")
    parser.add_argument("--questions", type=Path, required=True, help="the questions file the eval ran on")
    parser.add_argument("--index", type=Path, required=True, help="the index the eval ran on")
    parser.add_argument("--out", type=Path, required=True, help="where to write the rescored rows (JSON lines)")
    args = parser.parse_args(argv)
    try:
        if args.out.resolve() == results_file(args.results).resolve():
            raise SpecragError("--out is the results file itself: write the rescored rows to a new file")
        rows = read_results(args.results)
        questions = {q.id: q for q in read_questions(args.questions)[0]}
        chunks = live_chunks(args.index)
        rescored, kept = rescore_rows(rows, questions, chunk_texts(chunks), read_tool_pages(chunks))
    except (SpecragError, OSError) as err:
        print(f"specrag rescore: error: {err}", file=sys.stderr)
        return 2
    write_atomic(args.out, "".join(json.dumps(row) + "\n" for row in rescored))
    left = ", ".join(f"{count} {reason}" for reason, count in kept.items() if count)
    print(
        f"rescored {len(rescored) - sum(kept.values())} of {len(rescored)} rows -> {args.out}"
        + (f" (kept as they were: {left})" if left else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
