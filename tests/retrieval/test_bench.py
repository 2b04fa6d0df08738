"""The retrieval benchmark runs end to end on the fixture corpus and writes its JSON atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from retrieval_fakes import FakeEmbedder, every_model_load_gives

from app import bench_retrieval
from core.errors import run_reporting_errors
from retrieval import query_embedder
from retrieval.ingest import ingest

FIXTURES = Path(__file__).parent / "fixtures" / "docs"
QUESTIONS = [
    {
        "id": "q1",
        "question": "how do I rotate the munge key",
        "gold": ["munge-keys.txt"],
        "answer_keywords": ["/etc/munge/munge.key", "a phrase no fixture holds"],
    },
    {"id": "q2", "question": "restore the accounting database", "gold": ["backup.html"]},
    {"id": "q3", "question": "a question nobody can answer", "gold": ["missing.html"]},
]

CONVERSATIONS = [
    {
        "id": "c1",
        "kind": "new-topic",
        "previous": "how do I rotate the munge key",
        "question": "how do I restore the accounting database from a backup",
        "gold": ["backup.html"],
    },
    {
        "id": "u1",
        "kind": "unanswerable",
        "previous": "how do I rotate the munge key",
        "question": "who is on call for the tape library this weekend",
        "gold": [],
    },
]


def test_bench_reports_ingest_timings_hits_and_latency(tmp_path, monkeypatch, minilm, capsys):
    every_model_load_gives(monkeypatch, lambda: minilm)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    out = tmp_path / "results" / "bench.json"
    conversations = tmp_path / "conversations.jsonl"
    conversations.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS))
    argv = ["--index", str(tmp_path / "index"), "--questions", str(questions), "--docs", str(FIXTURES)]
    argv += ["--conversations", str(conversations), "--passages", "3,1"]
    assert bench_retrieval.main([*argv, "--out", str(out), "--repeats", "1"]) == 0

    results = json.loads(out.read_text())
    ingest = results["ingest"]
    assert ingest["full"]["written"] and ingest["full"]["files_reembedded"] == 4  # through the CLI, fresh process
    assert ingest["full"]["wall_seconds"] > ingest["full"]["seconds"] > 0
    assert not ingest["unchanged"]["written"] and ingest["unchanged_cli_seconds"] > 0
    assert ingest["touched"]["files_reembedded"] == 0
    assert ingest["edited"]["files_reembedded"] == 1 and ingest["edited"]["file"] == ingest["reverted"]["file"]
    evaluation = results["eval"]
    for name in ("hybrid", "dense", "bm25"):
        assert evaluation[name]["hit@5"] == round(2 / 3, 4) and evaluation[name]["misses"] == ["q3"]
        assert evaluation[name]["mrr"] == round(2 / 3, 4)  # q1, q2 first; q3 finds no gold page in the top 10
    latency = evaluation["latency_ms"]["hybrid"]
    assert latency["queries"] == 3 and 0 < latency["p50"] <= latency["p95"] <= latency["max"]
    printed = capsys.readouterr().out
    assert "hit@5: hybrid 0.667" in printed
    assert [p.name for p in out.parent.iterdir()] == ["bench.json"]  # no temp file left behind
    follow_ups = results["follow_ups"]
    assert set(follow_ups) == {"new-topic", "unanswerable"}
    ways = {"read, k passages", "read, and further"}
    assert set(follow_ups["new-topic"]) == {"rule", "with previous", "alone"} | ways
    read = [follow_ups["new-topic"][way] for way in sorted(ways)]
    # the new topic is searched alone: the earlier turn is kept bare, so all it reads is its own 6 (3 chunks here)
    assert read[0] == read[1] and read[0]["gold read"] == read[0]["gold new"] == 1.0 and 0 < read[0]["new"] <= 6
    new_topic = follow_ups["new-topic"]
    alone = new_topic["alone"]
    assert {k: alone[k] for k in ("questions", "hit@5", "mrr", "precision@6")} == {
        "questions": 1, "hit@5": 1.0, "mrr": 1.0, "precision@6": 0.5
    }  # fmt: skip
    assert alone["gated"] in (0.0, 1.0)
    # a question without gold has nothing to hit: only whether the gate would refuse it is reported
    assert follow_ups["unanswerable"]["rule"] == {"questions": 1, "gated": 1.0}
    assert new_topic["rule"] in (new_topic["alone"], new_topic["with previous"])  # the rule picks one of the two
    assert "follow-ups, new-topic: rule questions 1" in printed
    # the prompt's passage budget: q1's page is its first passage and holds one of its two keywords
    assert results["passages"]["1"]["gold_in_k"] == round(2 / 3, 3)
    assert results["passages"]["1"]["keywords_available"] == 0.5  # only q1 names keywords
    assert 0 < results["passages"]["1"]["tokens"] < results["passages"]["3"]["tokens"]
    assert "3 passages: gold page in them" in printed


def test_a_passage_count_list_that_is_not_whole_numbers_is_refused_with_the_expected_form(capsys):
    with pytest.raises(SystemExit):
        bench_retrieval.parse_args(["--index", "x", "--questions", "y", "--passages", "4,six"])
    assert "expected whole numbers of at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot read"), ('{"id": "q1"}\n[1]\n', ":2: expected a JSON object"), ("{oops\n", ":1: not valid JSON")],
)
def test_a_questions_file_that_cannot_be_read_is_one_clear_line_before_any_ingest(tmp_path, capsys, content, said):
    questions = tmp_path / "questions.jsonl"
    if content is not None:
        questions.write_text(content)
    index = tmp_path / "index"
    argv = ["--index", str(index), "--questions", str(questions), "--docs", str(tmp_path / "no-docs")]
    assert run_reporting_errors("python -m app.bench_retrieval", lambda: bench_retrieval.main(argv)) == 2
    assert said in capsys.readouterr().err
    assert not index.exists()  # failed before ingesting anything


def test_an_index_built_with_another_embedding_model_is_measured_once_the_model_is_named(tmp_path, monkeypatch, capsys):
    model_dir = tmp_path / "my-embedder"
    model_dir.mkdir()
    embedder = FakeEmbedder(str(model_dir.resolve()))
    ingest([FIXTURES], tmp_path / "index", embedder=embedder)
    monkeypatch.setattr(query_embedder, "load_query_embedder", lambda model=None, precision="auto": embedder)
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    argv = ["--index", str(tmp_path / "index"), "--questions", str(questions), "--skip-ingest", "--repeats", "1"]

    assert run_reporting_errors("python -m app.bench_retrieval", lambda: bench_retrieval.main(argv)) == 2
    assert f"pass --model {model_dir.resolve()} if you trust it" in capsys.readouterr().err
    assert bench_retrieval.main([*argv, "--model", str(model_dir)]) == 0
    assert "hit@5: hybrid" in capsys.readouterr().out
