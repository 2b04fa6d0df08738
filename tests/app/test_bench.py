"""`specrag bench` end to end on tiny models, plus its bookkeeping."""

import json

import pytest

from app import bench
from app.bench import METHODS, Bench, first_divergence, parse_methods
from app.cli import main
from generation.errors import SpecragError

ROWS = [
    {
        "question_id": 1,
        "category": "rag",
        "reference": [["sleeps"]],
        "turns": [
            "the quick brown fox jumps over the lazy dog\nthe lazy dog sleeps all day in the sun\nwhat does the dog do?"
        ],
    },
    {"question_id": 2, "category": "qa", "turns": ["who is there? who is there? who"]},
]
SUMMARY_KEYS = {
    "tokens_per_s",
    "speedup",
    "tokens_per_pass",
    "acceptance_rate",
    "identical_to_plain",
    "mean_new_tokens",
}
RUN_KEYS = {
    "output_token_ids",
    "new_tokens",
    "decode_s",
    "tokens_per_s",
    "tokens_per_pass",
    "target_passes",
    "acceptance_rate",
    "first_divergence",
    "divergence_margin",
    "identical_to_plain",
    "speedup",
}


@pytest.fixture
def questions(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in ROWS) + "\n")
    return path


def run_bench(tmp_path, questions, *extra):
    out = tmp_path / "results" / "bench.json"
    argv = ["bench", "--questions", str(questions), "--max-new-tokens", "24", "--out", str(out), *extra]
    return main(argv), out


def test_bench_writes_json_and_markdown_for_every_method(tiny_engine, tmp_path, questions, capsys):
    code, out = run_bench(tmp_path, questions)
    assert code == 0
    report = json.loads(out.read_text())
    assert list(report["summary"]) == list(METHODS)
    assert report["config"]["target_path"] == "/models/tiny-target" and report["config"]["questions"] == 2
    for method, summary in report["summary"].items():
        assert set(summary) >= SUMMARY_KEYS, method
        assert summary["mean_new_tokens"] > 0 and summary["tokens_per_s"] > 0 and summary["tokens_per_pass"] >= 1
    for method in ("plain", "ngram", "model", "hybrid"):
        assert report["summary"][method]["identical_to_plain"] == 1.0, method
    assert report["summary"]["plain"]["speedup"] == 1.0 and report["summary"]["plain"]["acceptance_rate"] is None
    assert report["summary"]["ngram"]["acceptance_rate"] is not None
    for question in report["questions"]:
        assert set(question["order"]) == set(METHODS)
        for run in question["methods"].values():
            assert set(run) >= RUN_KEYS and run["new_tokens"] == len(run["output_token_ids"]) > 0
    assert [q["order"][0] for q in report["questions"]] == ["plain", "hf-prompt-lookup"]  # rotated
    table = out.with_suffix(".md").read_text()
    assert all(f"| {m} |" in table for m in METHODS) and "geometric mean" in table
    assert "| hybrid |" in capsys.readouterr().out


def test_hf_baselines_start_from_the_prefilled_cache_and_match_plain(tiny_engine, tmp_path, questions):
    """transformers' own generate reproduces greedy plain decoding from a reused prefill."""
    target = tiny_engine[0]
    lengths = []
    forward = target.forward

    def recording_forward(*args, **kwargs):
        lengths.append(kwargs["input_ids"].shape[1])
        return forward(*args, **kwargs)

    target.forward = recording_forward
    try:
        code, out = run_bench(tmp_path, questions, "--methods", "plain,hf-prompt-lookup,hf-assisted", "--limit", "1")
    finally:
        del target.forward
    assert code == 0
    report = json.loads(out.read_text())
    prompt_tokens = report["questions"][0]["prompt_tokens"]
    assert lengths.count(prompt_tokens - 1) == 1  # the only prefill; every method reused it
    assert max(n for n in lengths if n != prompt_tokens - 1) <= 1 + bench.PROMPT_LOOKUP_TOKENS + 20
    for method in ("hf-prompt-lookup", "hf-assisted"):
        assert report["summary"][method]["identical_to_plain"] == 1.0, method
        assert report["summary"][method]["acceptance_rate"] is not None


def test_sampling_reports_no_identity(tiny_engine, tmp_path, questions):
    code, out = run_bench(tmp_path, questions, "--temperature", "0.8", "--methods", "plain,hybrid,hf-prompt-lookup")
    assert code == 0
    report = json.loads(out.read_text())
    assert all(s["identical_to_plain"] is None for s in report["summary"].values())
    assert all(run["first_divergence"] is None for q in report["questions"] for run in q["methods"].values())


def test_a_failure_midway_keeps_the_questions_already_measured(tiny_engine, tmp_path, questions, monkeypatch):
    calls = []
    run_method = Bench.run_method

    def failing(self, method, pre, config):
        calls.append(method)
        if pre.row["question_id"] == 2:
            raise RuntimeError("boom")
        return run_method(self, method, pre, config)

    monkeypatch.setattr(Bench, "run_method", failing)
    with pytest.raises(RuntimeError, match="boom"):
        run_bench(tmp_path, questions)
    report = json.loads((tmp_path / "results" / "bench.json").read_text())
    assert [q["question_id"] for q in report["questions"]] == [1]
    assert report["summary"]["plain"]["tokens_per_s"] > 0
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["bench.json", "bench.md"]


def test_divergence_index_and_methods_parsing():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2, 3], [1, 2]) == 2
    assert parse_methods("hybrid, plain,hybrid") == ["hybrid", "plain"]
    with pytest.raises(SpecragError, match="unknown method"):
        parse_methods("plain,eagle")


def test_without_a_draft_the_draft_methods_are_skipped(tiny_engine, tmp_path, questions, capsys):
    code, out = run_bench(tmp_path, questions, "--draft", "none", "--methods", "ngram,hybrid", "--limit", "1")
    assert code == 0
    assert list(json.loads(out.read_text())["summary"]) == ["plain", "ngram"]
    assert "skipping hybrid" in capsys.readouterr().err


def test_help_points_at_the_spec_bench_rag_file(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    assert "spec_bench/rag.jsonl" in capsys.readouterr().out
