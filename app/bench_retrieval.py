"""Retrieval benchmark: ingest timings, hit@5 of hybrid / dense / BM25, and hybrid query latency.

    python -m app.bench_retrieval --index DIR --questions corpora/slurm/questions.jsonl [--out FILE.json]
        [--conversations corpora/slurm/followups.jsonl]

Unless --skip-ingest is given, the corpus (--docs, default: the Slurm docs) is copied next to
the index (DIR-docs/) and ingested into DIR from scratch, timed: full ingest, re-ingest with
nothing changed (in process and through the CLI), one file touched (same bytes), one file
edited, and the edit reverted. Then every question is asked of the three retrievers; a hit
means one of the top-5 chunks comes from a gold page (app.eval.metrics: ranx, sources matched by
file name); questions with `gold: []` (the corpus cannot answer them) are left out.
Latency is measured on the hybrid retriever with k=8 after a warm-up, over all questions.
With --conversations (rows {id, kind, previous, question, gold}; `previous` one question or a list of the
conversation's questions so far, oldest first), each last question is
searched as the copilot would search a follow-up, against the question with the previous
one always and the question alone always: hit@5, MRR and precision (the share of the
prompt's passages from a gold page), per kind (a real follow-up, a new topic, or a
question the corpus cannot answer, `gold: []`, whose hit@5 means nothing), and `gated`,
the share the relevance gate would refuse on those passages (right only for unanswerable ones).
With --passages 4,6,8 (the prompt's passage count), each k gets, over the answerable questions:
the share with a gold page among the hybrid retriever's top k, the share of their
`answer_keywords` found in those k passages (the ceiling of an answer's keyword recall), and the
passages' length in the embedder's tokens: how chunk size and passage count trade against each other.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.copilot.options import DEFAULT_PASSAGES
from app.eval.metrics import retrieval_metrics
from core.atomic import write_atomic
from core.errors import SpecragError
from core.output_paths import output_file

if TYPE_CHECKING:
    from app.copilot import Copilot, Passage, Turn
    from retrieval.retriever import HybridRetriever, Retriever

WARMUP = 5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app.bench_retrieval", description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, required=True, help="index directory to build and evaluate")
    parser.add_argument("--questions", type=Path, required=True, help="JSONL: {id, question, gold: [file names]}")
    parser.add_argument("--docs", type=Path, help="corpus folder (default: the Slurm docs via corpora.slurm)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--skip-ingest", action="store_true", help="evaluate the existing index only")
    parser.add_argument(
        "--model", type=Path, help="the index's embedding model, when it is not the packaged one (trusts that folder)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="latency passes over the questions (default 3)")
    parser.add_argument(
        "--conversations", type=Path, help="JSONL of {id, kind, previous, question, gold}: follow-up retrieval"
    )
    parser.add_argument(
        "--passages", type=_counts, help="comma list of prompt passage counts, e.g. 4,6,8: gold and keywords within k"
    )
    return parser.parse_args(argv)


def _counts(text: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"expected whole numbers of at least 1 separated by commas, got {text!r}")
    return counts


# --- ingest timings --------------------------------------------------------------------------------


def timed_ingest(docs: Path, index: Path, **options) -> dict:
    from retrieval.ingest import IngestOptions, ingest

    report = ingest([docs], index, IngestOptions(**options))
    return {
        "seconds": report.seconds,
        "written": report.written,
        "files_reembedded": len(report.added) + len(report.updated),
        "chunks_embedded": report.embedded_chunks,
        "chunks": report.chunks,
        "skipped": report.skipped,
        "timings": report.timings,
    }


def cli_ingest(docs: Path, index: Path, *flags: str) -> dict:
    """`specrag ingest --json` in a fresh interpreter: its report plus the wall time, imports included."""
    started = time.perf_counter()
    code = "import sys; from app.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, "ingest", str(docs), "--index", str(index), "--json", *flags]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    report = json.loads(done.stdout)
    return {
        "wall_seconds": round(time.perf_counter() - started, 3),
        "seconds": report["seconds"],
        "written": report["written"],
        "files_reembedded": len(report["added"]) + len(report["updated"]),
        "chunks": report["chunks"],
        "skipped": report["skipped"],
        "timings": report["timings"],
    }


def median_file(docs: Path) -> Path:
    from retrieval.loaders import kind_of

    files = sorted((p for p in docs.rglob("*") if p.is_file() and kind_of(p)), key=lambda p: (p.stat().st_size, p.name))
    return files[len(files) // 2]


def ingest_timings(source: Path, index: Path) -> dict:
    docs = index.with_name(index.name + "-docs")
    shutil.rmtree(docs, ignore_errors=True)
    shutil.copytree(source, docs, symlinks=True)
    results = {"docs": str(docs), "full": cli_ingest(docs, index, "--rebuild")}  # end to end, as a user runs it
    results["unchanged"] = timed_ingest(docs, index)
    results["unchanged_cli_seconds"] = cli_ingest(docs, index)["wall_seconds"]
    victim = median_file(docs)
    original = victim.read_bytes()
    os.utime(victim)
    results["touched"] = {"file": victim.name, **timed_ingest(docs, index)}
    victim.write_bytes(edited(original))
    results["edited"] = {"file": victim.name, **timed_ingest(docs, index)}
    victim.write_bytes(original)
    results["reverted"] = {"file": victim.name, **timed_ingest(docs, index)}
    return results


def edited(data: bytes) -> bytes:
    note = b"<p>Edited by the retrieval benchmark: this paragraph changes the page.</p>"
    return data.replace(b"</body>", note + b"</body>", 1) if b"</body>" in data else data + b"\n" + note


# --- quality and latency ---------------------------------------------------------------------------


def load_questions(path: Path) -> list[dict]:
    """The JSONL rows of `path`; an unreadable file or a row that is not a JSON object is a clear error."""
    from app.eval.questions import RowError, json_object, read_lines

    rows = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json_object(line))
        except RowError as err:
            raise SpecragError(f"{path}:{number}: {err}; one JSON object per line") from err
    return rows


def hit_rate(retriever: Retriever, questions: list[dict], k: int = 5, depth: int = 10) -> dict:
    """hit@k and MRR (first gold page within `depth`, as `specrag eval` reports it) and the ids missed at k."""
    questions = [q for q in questions if q["gold"]]  # gold [] marks a question the corpus cannot answer
    misses, reciprocal = [], []
    for q in questions:
        sources = [r.source for r in retriever.retrieve(q["question"], k=depth)]
        found = retrieval_metrics(sources, q["gold"], ks=(k,))  # ranx, as in specrag eval
        reciprocal.append(found["mrr"])
        if not found[f"hit@{k}"]:
            misses.append(q["id"])
    return {
        f"hit@{k}": round(1 - len(misses) / len(questions), 4),
        "mrr": round(float(np.mean(reciprocal)), 4),
        "misses": misses,
    }


def latency_ms(retriever: Retriever, questions: list[dict], k: int, repeats: int) -> dict:
    for q in questions[:WARMUP]:
        retriever.retrieve(q["question"], k=k)
    samples = []
    for _ in range(repeats):
        for q in questions:
            started = time.perf_counter()
            retriever.retrieve(q["question"], k=k)
            samples.append((time.perf_counter() - started) * 1000)
    p50, p95 = np.percentile(samples, [50, 95])
    return {"k": k, "queries": len(samples), "p50": round(p50, 2), "p95": round(p95, 2), "max": round(max(samples), 2)}


def evaluate(hybrid: HybridRetriever, questions: list[dict], repeats: int) -> dict:
    results = {"chunks": len(hybrid.index)}
    for name, retriever in (("hybrid", hybrid), ("dense", hybrid.dense), ("bm25", hybrid.bm25)):
        results[name] = hit_rate(retriever, questions)
    results["latency_ms"] = {
        name: latency_ms(retriever, questions, k=8, repeats=repeats)
        for name, retriever in (("hybrid", hybrid), ("dense", hybrid.dense), ("bm25", hybrid.bm25))
    }
    return results


def passage_budget(retriever: HybridRetriever, questions: list[dict], counts: list[int]) -> dict:
    """For k passages in the prompt: a gold page among them, the answer keywords they hold, their tokens."""
    from app.eval.metrics import keyword_recall, source_matches

    rows = [q for q in questions if q["gold"]]
    ranked = [retriever.retrieve(q["question"], k=max(counts)) for q in rows]
    budget = {}
    for k in counts:
        gold, available, tokens = [], [], []
        for row, passages in zip(rows, ranked, strict=True):
            top = passages[:k]
            gold.append(any(source_matches(p.source, g) for p in top for g in row["gold"]))
            recall = keyword_recall(" ".join(p.indexed_text() for p in top), row.get("answer_keywords") or [])
            if recall is not None:
                available.append(recall)
            tokens.append(sum(retriever.embedder.count_tokens(p.text) for p in top))
        budget[str(k)] = {
            "gold_in_k": round(float(np.mean(gold)), 3),
            "keywords_available": round(float(np.mean(available)), 3) if available else None,
            "tokens": round(float(np.mean(tokens))),
        }
    return budget


def follow_up_retrieval(index: Path, conversations: list[dict], k: int = DEFAULT_PASSAGES) -> dict:
    """hit@5, MRR and precision of the copilot's follow-up rule against its two fixed alternatives, per kind."""
    from app.copilot import Copilot, CopilotOptions, Turn, gate
    from app.copilot.conversation import retrieval_query
    from app.eval.metrics import source_matches

    copilot = Copilot.retrieval_only(CopilotOptions(index_dir=index))
    scores: dict[str, dict[str, list[dict[str, float]]]] = {}
    for row in conversations:
        earlier = row["previous"]  # one question, or the conversation's questions so far, oldest first
        history = [Turn(question, "", ()) for question in ([earlier] if isinstance(earlier, str) else earlier)]
        ranked = {
            "rule": copilot.retrieve_for(row["question"], history, k)[0],
            "with previous": copilot.retrieve(retrieval_query(row["question"], history), k),
            "alone": copilot.retrieve(row["question"], k),
        }
        for policy, passages in ranked.items():
            sources = [p.source for p in passages]
            figures = {"gated": float(not gate.assess(passages, copilot.embedding_model).covered)}
            found = retrieval_metrics(sources, row["gold"], ks=(5,))
            if found is not None:  # an unanswerable question has no gold page to find
                hits = sum(any(source_matches(s, g) for g in row["gold"]) for s in sources)
                figures |= {"hit@5": found["hit@5"], "mrr": found["mrr"], f"precision@{k}": hits / max(len(sources), 1)}
            scores.setdefault(row["kind"], {}).setdefault(policy, []).append(figures)
        if row["gold"]:
            for policy, read in passages_read(copilot, row, k).items():
                gold = [
                    any(source_matches(p.source, g) for p in part for g in row["gold"])
                    for part in (read.held, read.new)
                ]
                figures = {"gold read": float(gold[0] or gold[1]), "gold new": float(gold[1]), "new": len(read.new)}
                scores[row["kind"]].setdefault(policy, []).append(figures)
    return {
        kind: {policy: {"questions": len(rows), **_means(rows)} for policy, rows in policies.items()}
        for kind, policies in scores.items()
    }


@dataclass(frozen=True)
class Read:
    held: list[Passage]  # passages of the earlier turns the prompt keeps
    new: list[Passage]  # this turn's passages


def passages_read(copilot: Copilot, row: dict, k: int) -> dict[str, Read]:
    """The passages the model reads for `row`'s last question in the chat: those of the earlier turns the prompt
    keeps (each earlier question asked in turn, its passages as the chat numbers them), and its own new ones,
    taken from its k passages alone (before session 55) or from the next ones of its search as well (the
    pipeline's `further_rankings`). Earlier answers are left empty, so more turns fit than in the chat."""
    from app.copilot import AnswerOptions, Turn
    from app.copilot.conversation import keep_history, number_new_passages

    budget = AnswerOptions().history_tokens

    def keep(history: list[Turn], question: str, query: str) -> list[Passage]:
        return keep_history(history, budget, _tokens, whole=not history or query != question).passages

    earlier = row["previous"]
    history: list[Turn] = []
    for question in [earlier] if isinstance(earlier, str) else earlier:
        passages, query = copilot.retrieve_for(question, history, k)
        further = copilot.further_rankings(question, query, history, k)
        new = number_new_passages(passages, keep(history, question, query), k, further)
        history.append(Turn(question, "", tuple(new), kept_earlier_bare=bool(history) and query == question))
    question = row["question"]
    passages, query = copilot.retrieve_for(question, history, k)
    held = keep(history, question, query)
    ways = {"k passages": (), "and further": copilot.further_rankings(question, query, history, k)}
    return {f"read, {way}": Read(held, number_new_passages(passages, held, k, more)) for way, more in ways.items()}


def _tokens(messages: list[dict[str, str]]) -> int:
    """About how many tokens `messages` take: four characters a token (the bench loads no tokenizer)."""
    return sum(len(m["content"]) for m in messages) // 4


def _means(rows: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's mean over the rows that have it, in the order the rows name them."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: round(float(np.mean([row[name] for row in rows if name in row])), 3) for name in names}


def summary(results: dict) -> str:
    lines = []
    if "ingest" in results:
        ing = results["ingest"]
        lines.append(
            f"ingest: full {ing['full']['wall_seconds']:.1f} s end to end ({ing['full']['chunks']} chunks), "
            f"unchanged {ing['unchanged']['seconds']:.2f} s (CLI {ing['unchanged_cli_seconds']:.2f} s), "
            f"touched {ing['touched']['seconds']:.2f} s ({ing['touched']['files_reembedded']} files re-embedded), "
            f"edited {ing['edited']['seconds']:.1f} s ({ing['edited']['files_reembedded']} file, "
            f"{ing['edited']['chunks_embedded']} chunks re-embedded)"
        )
    ev = results["eval"]
    lines.append(
        "hit@5: "
        + ", ".join(
            f"{name} {ev[name]['hit@5']:.3f} (MRR {ev[name]['mrr']:.3f})" for name in ("hybrid", "dense", "bm25")
        )
        + f" over {results['questions']} questions"
    )
    lat = ev["latency_ms"]
    lines.append(
        "latency k=8 (ms): "
        + ", ".join(
            f"{name} p50 {lat[name]['p50']:.1f} p95 {lat[name]['p95']:.1f}" for name in ("hybrid", "dense", "bm25")
        )
    )
    for k, row in results.get("passages", {}).items():
        lines.append(
            f"{k} passages: gold page in them {row['gold_in_k']:.3f}, answer keywords in them "
            f"{row['keywords_available']}, {row['tokens']} tokens"
        )
    for kind, policies in results.get("follow_ups", {}).items():
        lines.append(
            f"follow-ups, {kind}: "
            + "; ".join(f"{policy} " + " ".join(f"{m} {v}" for m, v in row.items()) for policy, row in policies.items())
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.out:
        output_file(args.out)  # before the ingest and the measuring
    index = args.index.expanduser().resolve()
    results: dict = {"index": str(index), "questions": 0, "machine": {"cpus": os.cpu_count()}}
    questions = load_questions(args.questions)  # before the ingest: a bad file fails at once
    conversations = load_questions(args.conversations) if args.conversations else None
    if not args.skip_ingest:
        from corpora.slurm import ensure_slurm_docs

        results["ingest"] = ingest_timings(args.docs or ensure_slurm_docs(), index)
    results["questions"] = len(questions)
    from retrieval.retriever import open_index

    started = time.perf_counter()
    hybrid = open_index(index, model=args.model)  # once: the embedding model takes seconds to load
    opened = {"open_index_seconds": round(time.perf_counter() - started, 3)}
    results["eval"] = opened | evaluate(hybrid, questions, args.repeats)
    if args.passages:
        results["passages"] = passage_budget(hybrid, questions, args.passages)
    if conversations is not None:
        results["follow_ups"] = follow_up_retrieval(index, conversations)
    if args.out:
        write_atomic(args.out, json.dumps(results, indent=1) + "\n")
    print(summary(results))
    return 0


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.bench_retrieval", main))
