"""`specrag bench` end to end on tiny models, plus its bookkeeping."""

import json
import sys
import types
from contextlib import contextmanager
from typing import ClassVar

import pytest
import torch

from app import bench
from app.bench import LLAMACPP, METHODS, Bench, first_divergence, parse_methods
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
    "ttft_s",
    "first_token_s",
}
WITHOUT_LLAMACPP = [m for m in METHODS if m != LLAMACPP]


@pytest.fixture(autouse=True)
def no_llamacpp(monkeypatch):
    """llama-cpp-python (the optional bench extra) is absent unless a test installs the fake below."""
    monkeypatch.setitem(sys.modules, "llama_cpp", None)


@pytest.fixture(autouse=True)
def flat_pass_cost(monkeypatch):
    """A flat measured cost curve, so drafting always pays and every drafter is exercised (the real
    calibration of a tiny model on a busy machine can say otherwise)."""
    monkeypatch.setattr("generation.engine.cached_relative_costs", lambda *a, **k: dict.fromkeys(range(1, 17), 1.0))


class FakeLlama:
    """llama_cpp.Llama over the tiny target: greedy continuation of the given ids, one token per pass."""

    instances: ClassVar[list["FakeLlama"]] = []
    model: ClassVar = None

    def __init__(self, model_path, **kwargs):
        self.model_path, self.kwargs, self.resets, self.prompts = model_path, kwargs, 0, []
        FakeLlama.instances.append(self)

    def reset(self):
        self.resets += 1

    def generate(self, tokens, reset=True, **sampler):
        assert sampler["temp"] == 0.0 and sampler["repeat_penalty"] == 1.0
        self.prompts.append(list(tokens))
        ids = list(tokens)
        while True:
            with torch.inference_mode():
                token = int(FakeLlama.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            yield token
            ids.append(token)

    def detokenize(self, tokens):
        return bytes(t % 256 for t in tokens)


@pytest.fixture
def fake_llamacpp(monkeypatch, tiny_engine, tmp_path):
    FakeLlama.instances, FakeLlama.model = [], tiny_engine[0]
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=FakeLlama))
    # llama.cpp's default buffers run here, unless a test says they crash (test_bench_llamacpp.py probes for real)
    monkeypatch.setattr("app.bench_llamacpp.default_buffers_run", lambda gguf, threads: True)
    gguf = tmp_path / "target.gguf"
    gguf.write_bytes(b"GGUF")
    return gguf


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
    assert list(report["summary"]) == WITHOUT_LLAMACPP  # its package is not installed
    assert report["config"]["target_path"] == "/models/tiny-target" and report["config"]["questions"] == 2
    for method, summary in report["summary"].items():
        assert set(summary) >= SUMMARY_KEYS, method
        assert summary["mean_new_tokens"] > 0 and summary["tokens_per_s"] > 0 and summary["tokens_per_pass"] >= 1
        assert summary["ttft_s"] > 0 and summary["slowest_speedup"] <= summary["speedup"] + 1e-9
    for method in ("plain", "ngram", "model", "hybrid"):
        assert report["summary"][method]["identical_to_plain"] == 1.0, method
    assert report["summary"]["plain"]["speedup"] == 1.0 and report["summary"]["plain"]["acceptance_rate"] is None
    assert report["summary"]["ngram"]["acceptance_rate"] is not None
    for question in report["questions"]:
        assert set(question["order"]) == set(WITHOUT_LLAMACPP)
        for run in question["methods"].values():
            assert set(run) >= RUN_KEYS and run["new_tokens"] == len(run["output_token_ids"]) > 0
            # time to first token = the prompt's prefill + the method's own wait
            assert run["ttft_s"] >= question["prefill_s"] + run["first_token_s"] - 1e-3
        # the model method pays the draft's prefill inside its decode time, as the product does
        assert 0 < question["methods"]["model"]["draft_prefill_s"] < question["methods"]["model"]["decode_s"]
        assert question["methods"]["ngram"]["draft_prefill_s"] == 0
    assert [q["order"][0] for q in report["questions"]] == ["plain", "hf-prompt-lookup"]  # rotated
    table = out.with_suffix(".md").read_text()
    assert all(f"| {m} |" in table for m in WITHOUT_LLAMACPP) and "geometric mean" in table and "TTFT" in table
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


def test_llamacpp_plain_decodes_the_same_ids_from_an_empty_cache(fake_llamacpp, tmp_path, questions):
    code, out = run_bench(tmp_path, questions, "--methods", "plain,hybrid,llamacpp-plain", "--gguf", str(fake_llamacpp))
    assert code == 0
    report = json.loads(out.read_text())
    (llm,) = FakeLlama.instances
    assert llm.model_path == str(fake_llamacpp) and llm.kwargs["n_threads"] == torch.get_num_threads()
    runs = [q["methods"] for q in report["questions"]]
    assert llm.resets == len(llm.prompts) == 2 + 1  # two questions plus the warm-up, each from a reset cache
    assert [len(p) for p in llm.prompts[1:]] == [q["prompt_tokens"] for q in report["questions"]]
    for question, methods in zip(report["questions"], runs, strict=True):
        assert (
            llm.prompts.count(llm.prompts[-1]) >= 1 and len(llm.prompts[0]) == report["questions"][0]["prompt_tokens"]
        )
        run = methods[LLAMACPP]
        assert run["new_tokens"] == methods["plain"]["new_tokens"] <= 24  # stopped at EOS or the budget
        assert run["identical_to_plain"] is True  # the fake is the tiny target's greedy decoding
        assert run["ttft_s"] == run["first_token_s"] > 0 and run["tokens_per_s"] > 0
        assert question["order"][0] in ("plain", "hybrid")
    assert report["summary"][LLAMACPP]["ttft_s"] > 0
    assert "| llamacpp-plain |" in out.with_suffix(".md").read_text()


def test_llamacpp_plain_is_a_clear_error_without_its_package(tiny_engine, tmp_path, questions, capsys, monkeypatch):
    loaded = []
    monkeypatch.setattr(bench.Copilot, "load", lambda *a, **k: loaded.append(1))
    gguf = tmp_path / "t.gguf"
    gguf.write_bytes(b"GGUF")
    code = main(
        [
            "bench",
            "--questions",
            str(questions),
            "--methods",
            "plain,llamacpp-plain",
            "--gguf",
            str(gguf),
            "--out",
            str(tmp_path / "b.json"),
        ]
    )
    assert code == 2
    assert "pip install -e '.[bench]'" in capsys.readouterr().err
    assert not loaded  # before any model loads
    assert not (tmp_path / "b.json").exists()


def test_llamacpp_plain_needs_a_gguf_for_a_model_folder(fake_llamacpp, tmp_path, questions, capsys):
    code = main(
        [
            "bench",
            "--questions",
            str(questions),
            "--methods",
            "llamacpp-plain",
            "--target",
            str(tmp_path),
            "--out",
            str(tmp_path / "b.json"),
        ]
    )
    assert code == 2 and "--gguf FILE" in capsys.readouterr().err


def test_pass_cost_table_has_every_k_and_the_prefill(tiny_engine, capsys):
    from app import bench_passes

    assert bench_passes.main(["--context", "40"]) == 0
    out = capsys.readouterr().out
    row = out.strip().splitlines()[-1].split("|")[1:-1]
    assert row[0].strip() == "none" and len(row) == 1 + len(bench_passes.SIZES) + 1
    assert all(float(cell) > 0 for cell in row[1:])


def test_a_results_path_the_bench_cannot_write_is_refused_before_any_model_loads(
    tmp_path, questions, capsys, monkeypatch
):
    loaded = []
    monkeypatch.setattr(bench.Copilot, "load", lambda *a, **k: loaded.append(1))
    (tmp_path / "plain").write_text("x")
    for out, says in [(tmp_path, "is a folder; give a file name"), (tmp_path / "plain" / "b.json", "cannot write")]:
        code = main(["bench", "--questions", str(questions), "--methods", "plain", "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and says in err and "Traceback" not in err
    assert not loaded  # a wrong --out costs no model load and no measurement


def test_llamacpp_plain_runs_without_extra_buffers_where_its_defaults_crash(fake_llamacpp, tmp_path, questions, capsys,
                                                                             monkeypatch):  # fmt: skip
    switched = []

    @contextmanager
    def recording_switch():
        switched.append("on")
        yield

    monkeypatch.setattr("app.bench_llamacpp.default_buffers_run", lambda gguf, threads: False)
    monkeypatch.setattr("app.bench_llamacpp.without_extra_buffers", recording_switch)
    code, out = run_bench(tmp_path, questions, "--methods", "plain,llamacpp-plain", "--gguf", str(fake_llamacpp))
    assert code == 0 and switched == ["on"] and len(FakeLlama.instances) == 1
    assert json.loads(out.read_text())["config"]["llamacpp_extra_buffers"] is False
    assert "llamacpp-plain runs without them" in capsys.readouterr().err


def test_llamacpp_plain_keeps_its_default_buffers_where_they_run(fake_llamacpp, tmp_path, questions, monkeypatch):
    monkeypatch.setattr("app.bench_llamacpp.default_buffers_run", lambda gguf, threads: True)
    monkeypatch.setattr("app.bench_llamacpp.without_extra_buffers", lambda: pytest.fail("switched needlessly"))
    code, out = run_bench(tmp_path, questions, "--methods", "plain,llamacpp-plain", "--gguf", str(fake_llamacpp))
    assert code == 0 and json.loads(out.read_text())["config"]["llamacpp_extra_buffers"] is True
