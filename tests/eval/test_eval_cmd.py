"""`specrag eval` end to end with tiny models over a fake-embedder index of the fixture docs."""

import json
from pathlib import Path

import pytest

from app.cli import build_parser
from app.copilot import Copilot, CopilotOptions
from app.eval_cmd import run
from core.errors import SpecragError

from .evalkit import factory

PNG = b"\x89PNG\r\n\x1a\n"
QUESTIONS = [
    {
        "id": "munge",
        "question": "How do I rotate the munge key?",
        "gold_sources": ["munge-keys.txt"],
        "reference_answer": "Stop munged, copy the new /etc/munge/munge.key to every node, start munged.",
        "answer_keywords": ["munge.key", "munged"],
        "kind": "admin",
    },
    {
        "id": "gpu",
        "question": "How do I drain a GPU node with Xid errors?",
        "gold_sources": ["docs/gpu-drain.rst"],
        "reference_answer": "scontrol update nodename=gpu07 state=drain",
        "answer_keywords": ["state=drain"],
        "kind": "admin",
    },
    {
        "id": "price",
        "question": "What does a GPU node cost?",
        "gold_sources": [],
        "reference_answer": "The sources do not cover prices.",
        "kind": "unanswerable",
    },
]


def write_questions(path, rows, extra_lines=()):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(f"{line}\n" for line in extra_lines))
    return path


def eval_args(questions, out, *flags):
    argv = ["eval", str(questions), "--out", str(out), "--max-new-tokens", "12", "-k", "3", *flags]
    return build_parser().parse_args(argv)


def test_eval_writes_rows_report_and_plots(tmp_path, fake_index, loaded_tiny, capsys):
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS, ['{"id": "broken"', '{"id": "x", "question": 3}'])
    out = tmp_path / "out"
    assert run(eval_args(questions, out, "--compare-plain"), factory(fake_index, loaded_tiny)) == 0
    captured = capsys.readouterr()
    assert f"{questions}:4: skipped: not valid JSON" in captured.err
    assert f"{questions}:5: skipped: missing or empty 'question'" in captured.err
    assert captured.out.startswith("specrag eval: 3 questions (0 errors)") and "speedup" in captured.out

    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["munge", "gpu", "price"]
    munge, gpu, price = rows
    assert munge["retrieval"]["metrics"]["hit@1"] == 1.0  # the fake index ranks munge-keys.txt first
    assert [s["rank"] for s in munge["retrieval"]["sources"]] == list(range(1, len(munge["retrieval"]["sources"]) + 1))
    assert munge["retrieval"]["sources"][0]["gold"] and munge["retrieval"]["sources"][0]["score"] > 0
    assert gpu["retrieval"]["metrics"]["hit@10"] == 1.0  # path-suffix gold
    assert price["retrieval"]["metrics"] is None and price["abstention"]["expected"] is True
    for row in rows:
        assert row["status"] == "ok"
        assert set(row["answer"]) >= {"text", "keyword_recall", "exact_match", "f1", "citations", "grounding"}
        grounding = row["answer"]["grounding"]
        assert set(grounding["nearest"]) <= set(grounding["ungrounded"])  # pointers only for items not found
        assert 0 <= len(grounding["misattributed"]) <= grounding["attributed"] <= grounding["found"]
        assert row["abstention"]["correct"] == (row["abstention"]["abstained"] == row["unanswerable"])
        assert row["speed"]["speculation"] == "hybrid" and row["speed"]["tokens_per_pass"] >= 1
        assert row["speed"]["code_steered"] >= 0  # decoding kept code to the sources (copied_code.py)
        assert row["plain"]["speed"]["speculation"] == "none"
        assert row["plain"]["identical"] is True  # exact speculative decoding under greedy
        assert row["plain"]["speedup"] > 0

    report = (out / "report.md").read_text()
    assert "## Headline" in report and "| metric | mean | median | n |" in report and "| hit@5 |" in report
    assert "## By kind" in report and "| admin | 2 |" in report and "## Worst answers" in report
    summary = json.loads((out / "report.json").read_text())
    assert summary["metrics"]["hit@1"]["n"] == 2 and summary["questions"] == 3
    assert "code_from_sources True" in report
    assert set(summary["plots"]) == {"speedup", "passes_vs_copied", "latency", "hit_at_k"}
    for plot in summary["plots"].values():
        assert Path(plot).read_bytes()[:8] == PNG
        assert f"plots/{plot.rsplit('/', 1)[1]}" in report


def test_retrieval_only_loads_no_models(tmp_path, fake_index, capsys):
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS)
    make = factory(fake_index, None)
    seen = []

    def spy(options, retrieval_only):
        seen.append(retrieval_only)
        return make(options, retrieval_only)

    assert run(eval_args(questions, tmp_path / "out", "--retrieval-only"), spy) == 0
    assert seen == [True]
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert all("answer" not in r and "retrieval" in r for r in rows)
    assert (tmp_path / "out" / "plots" / "hit_at_k.png").read_bytes()[:8] == PNG
    assert "hit@5 1.000" in capsys.readouterr().out


def test_a_retrieval_only_copilot_refuses_to_answer(fake_index):
    copilot = factory(fake_index, None)(CopilotOptions(), True)
    assert copilot.retrieve("munge key", 2)[0].source.endswith("munge-keys.txt")
    with pytest.raises(SpecragError, match="retrieval only"):
        list(copilot.answer("How do I rotate the munge key?"))
    assert isinstance(Copilot.retrieval_only(), Copilot)


def test_a_fresh_run_into_used_results_is_refused(tmp_path, fake_index):
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS[:1])
    run(eval_args(questions, tmp_path / "out", "--retrieval-only"), factory(fake_index, None))
    with pytest.raises(SpecragError, match="--resume"):
        run(eval_args(questions, tmp_path / "out", "--retrieval-only"), factory(fake_index, None))


def test_a_file_without_one_usable_question_is_an_error_that_shows_a_row(tmp_path, fake_index, capsys):
    empty = write_questions(tmp_path / "empty.jsonl", [])
    with pytest.raises(SpecragError, match=r'holds no rows; each line needs .*"question": "How do I'):
        run(eval_args(empty, tmp_path / "out", "--retrieval-only"), factory(fake_index, None))
    broken = write_questions(tmp_path / "broken.jsonl", [{"id": "q1"}], ["not json"])
    with pytest.raises(SpecragError, match="all 2 rows were skipped"):
        run(eval_args(broken, tmp_path / "out", "--retrieval-only"), factory(fake_index, None))
    assert "broken.jsonl:2: skipped: not valid JSON" in capsys.readouterr().err
    with pytest.raises(SpecragError, match="--limit must be at least 1, got 0"):
        run(eval_args(write_questions(tmp_path / "q.jsonl", QUESTIONS), tmp_path / "out", "--limit", "0"))
    assert not (tmp_path / "out").exists()  # nothing written, not even an empty report


def test_results_that_cannot_be_written_are_refused_before_the_models_load(tmp_path, fake_index):
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS[:1])
    (tmp_path / "plain").write_text("x")
    loads = []

    def counting(options, retrieval_only):
        loads.append(1)
        return factory(fake_index, None)(options, retrieval_only)

    with pytest.raises(SpecragError, match="is a file, not a folder"):
        run(eval_args(questions, tmp_path / "plain", "--retrieval-only"), counting)
    with pytest.raises(SpecragError, match=r"cannot write into .*choose a path you can write to"):
        run(eval_args(questions, tmp_path / "plain" / "out", "--retrieval-only"), counting)
    assert not loads
