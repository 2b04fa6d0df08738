"""End to end with the real packaged MiniLM: ingest the fixture corpus, search it, and the CLI."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from retrieval_fakes import FakeEmbedder, every_model_load_gives

import corpora
import corpora.slurm
from app import ingest_cmd, search_cmd
from retrieval.embeddings import DEFAULT_MODEL_NAME, Embedder, default_embedding_model_path, resolve_model
from retrieval.errors import EmbeddingModelError
from retrieval.ingest import ingest
from retrieval.retriever import FUSION_WEIGHTS, open_index

FIXTURES = Path(__file__).parent / "fixtures" / "docs"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, minilm, pdf_maker):
    root = tmp_path_factory.mktemp("search")
    docs = Path(shutil.copytree(FIXTURES, root / "docs"))
    pdf_maker(docs / "power.pdf", ["Power supply overview.", "Breaker 4B feeds rack 12; call facilities first."])
    ingest([docs], root / "index", embedder=minilm)
    return root


@pytest.fixture(scope="module")
def retriever(corpus, minilm):
    return open_index(corpus / "index", minilm)


def top_source(results) -> str:
    return Path(results[0].source).name


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("how do I rotate the munge key", "munge-keys.txt"),
        ("restore the accounting database from a dump", "backup.html"),
        ("a GPU shows Xid errors in the kernel log", "gpu-drain.rst"),
        ("restart the slurm controller daemon", "runbook-slurmctld.md"),
        ("which breaker feeds rack 12", "power.pdf"),
    ],
)
def test_each_retriever_finds_the_obvious_document(retriever, query, expected):
    for mode in (retriever, retriever.dense, retriever.bm25):
        assert top_source(mode.retrieve(query, k=3)) == expected, mode.name


def test_dense_matches_meaning_without_shared_words(retriever):
    query = "cryptographic credential"
    assert all(Path(r.source).name != "munge-keys.txt" for r in retriever.bm25.retrieve(query, k=3))
    assert top_source(retriever.dense.retrieve(query, k=3)) == "munge-keys.txt"
    assert top_source(retriever.retrieve(query, k=3)) == "munge-keys.txt"


def test_hybrid_results_carry_fused_and_per_retriever_scores(retriever):
    results = retriever.retrieve("replay binary logs to a point in time", k=5)
    assert 1 <= len(results) <= 5
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    for r in results:
        assert set(r.ranks) <= {"dense", "bm25"} and set(r.scores) == set(r.ranks)
        assert r.score == pytest.approx(sum(FUSION_WEIGHTS[name] / (60 + rank) for name, rank in r.ranks.items()))
    best = results[0]
    assert best.heading == "Restoring a backup > Point in time recovery" and best.title == "Database backups"
    assert "mysqlbinlog" in best.text and best.ranks == {"dense": 1, "bm25": 1}


def test_positions_locate_the_chunk(retriever):
    pdf_hit = retriever.retrieve("breaker feeding rack 12", k=1)[0]
    assert pdf_hit.position.page == 2
    md_hit = retriever.retrieve("watch slurmctld.log for running as primary controller", k=1)[0]
    raw = Path(md_hit.source).read_text(encoding="utf-8")
    assert raw[md_hit.position.start : md_hit.position.end] == md_hit.text


def test_page_furniture_is_not_searchable(retriever):
    for token in ("script-should-not-appear", "trackingToken", "Navigation link only"):
        assert all(token not in r.text for r in retriever.bm25.retrieve(token, k=5))


def test_blank_query_and_bad_k(retriever):
    assert retriever.retrieve("   ", k=3) == []
    with pytest.raises(ValueError):
        retriever.retrieve("munge", k=0)


def test_packaged_model_is_found_offline(minilm, tmp_path):
    path = default_embedding_model_path()
    assert (path / "model.safetensors").is_file()
    assert resolve_model(None) == (DEFAULT_MODEL_NAME, path) == resolve_model(path)
    with pytest.raises(EmbeddingModelError, match="does not exist"):
        resolve_model(tmp_path / "no-such-model")
    assert (minilm.model_id, minilm.dim) == (DEFAULT_MODEL_NAME, 384)
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    long_text = "scontrol update nodename=node01 state=resume " * 60
    reference = minilm.tokenizer(long_text, add_special_tokens=False)["input_ids"]
    assert minilm.count_tokens(long_text) == len(reference) > 300  # no padding or truncation to 128
    vectors = minilm.embed_documents(["sinfo lists partitions", "squeue lists jobs"])
    assert vectors.shape == (2, 384) and vectors.dtype.name == "float32"
    assert (abs((vectors**2).sum(axis=1) - 1) < 1e-5).all()


def test_bfloat16_and_float32_vectors_agree(minilm):
    texts = ["drain a node with scontrol", "sacct shows the exit code of a finished job", "munge key rotation"]
    exact = Embedder.load(precision="float32")
    assert exact.precision == "float32"
    reference = exact.embed_documents(texts)
    fast = minilm if minilm.precision == "bfloat16" else Embedder.load(precision="bfloat16")
    vectors = fast.embed_documents(texts)
    assert (abs((vectors**2).sum(axis=1) - 1) < 1e-5).all()  # normalised in float32 after the bf16 model
    assert ((vectors * reference).sum(axis=1) > 0.99).all()
    assert not (vectors == reference).all()  # it really ran in bf16
    query = fast.embed_query(texts[1])
    assert int(np.argmax(reference @ query[0])) == 1


def test_unknown_precision_is_refused():
    with pytest.raises(EmbeddingModelError, match="float32"):
        Embedder.load(precision="int4")


# --- the CLI commands ------------------------------------------------------------------------------


def cli(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="specrag")
    sub = parser.add_subparsers(dest="command", required=True)
    ingest_cmd.register(sub)
    search_cmd.register(sub)
    return parser.parse_args(argv)


@pytest.fixture
def reuse_minilm(monkeypatch, minilm):
    every_model_load_gives(monkeypatch, lambda: minilm)


def test_cli_ingest_then_search_json(tmp_path, capsys, reuse_minilm):
    docs, index = Path(shutil.copytree(FIXTURES, tmp_path / "docs")), tmp_path / "index"
    assert ingest_cmd.run(cli(["ingest", str(docs), "--index", str(index), "--json"])) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["added"]) == 4 and report["chunks"] > 0 and report["written"]

    assert (
        search_cmd.run(cli(["search", "rotate", "the", "munge", "key", "--index", str(index), "-k", "2", "--json"]))
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert payload["query"] == "rotate the munge key" and len(payload["results"]) == 2
    first = payload["results"][0]
    assert first["rank"] == 1 and Path(first["source"]).name == "munge-keys.txt"
    assert {"score", "scores", "ranks", "chunk_id", "title", "heading", "position", "text"} <= set(first)

    assert search_cmd.run(cli(["search", "Xid", "--index", str(index), "--mode", "bm25"])) == 0
    text = capsys.readouterr().out
    assert text.startswith("1. Draining a GPU node") and "bm25" in text and "gpu-drain.rst" in text


def test_cli_ingest_reports_skips_in_text(tmp_path, capsys, reuse_minilm):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# Fairshare\n\nUsage decays with PriorityDecayHalfLife.\n")
    (docs / "bad.txt").write_bytes(b"\x00\x00binary")
    assert ingest_cmd.run(cli(["ingest", str(docs), "--index", str(tmp_path / "index"), "--quiet"])) == 0
    out = capsys.readouterr().out
    assert "1 added" in out and "bad.txt: binary content" in out


def test_named_corpora(tmp_path, monkeypatch, capsys):
    assert ingest_cmd.corpus_path("runbooks") == corpora.bundled_runbooks_dir()
    monkeypatch.setattr(corpora.slurm, "ensure_slurm_docs", lambda cache_dir=None: FIXTURES / "html")
    every_model_load_gives(monkeypatch, FakeEmbedder)
    assert ingest_cmd.run(cli(["ingest", "--corpus", "slurm", "--index", str(tmp_path / "index"), "--json"])) == 0
    assert [Path(p).name for p in json.loads(capsys.readouterr().out)["added"]] == ["backup.html"]
