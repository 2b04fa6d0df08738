"""The query embedder gives sentence-transformers' vectors without importing it, and hands
every layout it does not know back to sentence-transformers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval.embeddings import Embedder, default_embedding_model_path
from retrieval.query_embedder import QueryEmbedder, load_query_embedder, plain_recipe

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "How do I drain a node?",
    "   leading and trailing whitespace\n\t ",
    "Ünïcødé — naïve café, 日本語のテキスト, emoji 🚀",
    "scontrol update NodeName=c[001-042] State=DRAIN Reason='firmware'",
    "x",
    " ".join(["a very long question about slurm partitions and reservations"] * 80),  # past max_seq_length
]


@pytest.fixture(scope="module")
def light() -> QueryEmbedder:
    embedder = load_query_embedder()
    assert isinstance(embedder, QueryEmbedder)  # the packaged MiniLM is the plain layout
    return embedder


@pytest.mark.parametrize("text", TEXTS)
def test_query_vectors_equal_sentence_transformers(light: QueryEmbedder, minilm: Embedder, text: str) -> None:
    ours, theirs = light.embed_query(text), minilm.embed_query(text)
    assert ours.shape == theirs.shape == (1, minilm.dim) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    assert light.count_tokens(text) == minilm.count_tokens(text)


def test_identity_and_batch_helpers_match(light: QueryEmbedder, minilm: Embedder) -> None:
    assert (light.model_id, light.path, light.dim, light.max_tokens) == (
        minilm.model_id,
        minilm.path,
        minilm.dim,
        minilm.max_tokens,
    )
    # a text at a time: where `auto` means bf16 (AVX512-BF16, AMX), sentence-transformers' padded batches round
    # differently from its single texts (up to 1.3e-3 apart on an AVX512-BF16 EPYC, session 26)
    singles = np.concatenate([minilm.embed_query(text) for text in TEXTS[:3]])
    np.testing.assert_allclose(light.embed_documents(TEXTS[:3]), singles, atol=1e-6)
    assert light.embed_documents([]).shape == (0, minilm.dim)


def test_float32_batches_equal_sentence_transformers_batches() -> None:
    ours, theirs = load_query_embedder(precision="float32"), Embedder.load(precision="float32")
    np.testing.assert_allclose(ours.embed_documents(TEXTS[:3]), theirs.embed_documents(TEXTS[:3]), atol=1e-6)


def test_bfloat16_query_matches_sentence_transformers_in_bfloat16() -> None:
    ours = load_query_embedder(precision="bfloat16")
    theirs = Embedder.load(precision="bfloat16")
    for text in TEXTS[:4]:
        np.testing.assert_allclose(ours.embed_query(text), theirs.embed_query(text), atol=1e-6)


def _copy_model(tmp_path: Path) -> Path:
    return Path(shutil.copytree(default_embedding_model_path(), tmp_path / "model"))


def _edit_json(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


def _pooling_config(model: Path) -> Path:
    modules = json.loads((model / "modules.json").read_text(encoding="utf-8"))
    return model / modules[1]["path"] / "config.json"


def test_plain_recipe_reads_the_packaged_layout(tmp_path: Path) -> None:
    assert plain_recipe(_copy_model(tmp_path)) == {"pooling": "mean", "dim": 384, "max_tokens": 256, "normalize": True}


def test_cls_pooling_is_plain_too(tmp_path: Path) -> None:
    model = _copy_model(tmp_path)
    _edit_json(_pooling_config(model), pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    assert plain_recipe(model)["pooling"] == "cls"
    ours, theirs = load_query_embedder(model), Embedder.load(model)
    assert isinstance(ours, QueryEmbedder)
    np.testing.assert_allclose(ours.embed_query(TEXTS[0]), theirs.embed_query(TEXTS[0]), atol=1e-6)


def test_a_layout_without_normalize_is_plain_and_still_unit_length(tmp_path: Path) -> None:
    model = _copy_model(tmp_path)
    modules = json.loads((model / "modules.json").read_text(encoding="utf-8"))
    (model / "modules.json").write_text(json.dumps(modules[:2]), encoding="utf-8")
    assert plain_recipe(model)["normalize"] is False
    ours, theirs = load_query_embedder(model, precision="bfloat16"), Embedder.load(model, precision="bfloat16")
    vector = ours.embed_query(TEXTS[2])
    np.testing.assert_allclose(vector, theirs.embed_query(TEXTS[2]), atol=1e-6)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-6


def _max_pooling(model: Path) -> None:
    _edit_json(_pooling_config(model), pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)


def _prompts(model: Path) -> None:
    config = model / "config_sentence_transformers.json"
    data = json.loads(config.read_text(encoding="utf-8")) if config.exists() else {}
    data["prompts"] = {"query": "query: "}
    config.write_text(json.dumps(data), encoding="utf-8")


def _extra_module(model: Path) -> None:
    modules = json.loads((model / "modules.json").read_text(encoding="utf-8"))
    modules.append({"idx": len(modules), "name": "9", "path": "9_Dense", "type": "sentence_transformers.models.Dense"})
    (model / "modules.json").write_text(json.dumps(modules), encoding="utf-8")


def _lower_case(model: Path) -> None:
    _edit_json(model / "sentence_bert_config.json", do_lower_case=True)


def _broken_modules(model: Path) -> None:
    (model / "modules.json").write_text("{not json", encoding="utf-8")


@pytest.mark.parametrize("change", [_max_pooling, _prompts, _extra_module, _lower_case, _broken_modules])
def test_any_other_layout_is_left_to_sentence_transformers(tmp_path: Path, change) -> None:
    model = _copy_model(tmp_path)
    change(model)
    assert plain_recipe(model) is None


def test_an_unknown_layout_loads_sentence_transformers(tmp_path: Path) -> None:
    model = _copy_model(tmp_path)
    _max_pooling(model)
    embedder = load_query_embedder(model)
    assert isinstance(embedder, Embedder)
    assert embedder.embed_query(TEXTS[0]).shape == (1, 384)


def test_serving_a_query_never_imports_sentence_transformers(tmp_path: Path, minilm: Embedder) -> None:
    """Opening an index and searching it (what `specrag ask` and the chat do) stays off sentence-transformers."""
    from retrieval.ingest import ingest

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "drain.md").write_text("# Drain\nUse `scontrol update NodeName=n1 State=DRAIN Reason=x`.\n")
    (docs / "other.md").write_text("# Backups\nNightly backups start at 01:00.\n")
    ingest([docs], tmp_path / "index", embedder=minilm)
    script = (
        "import sys\n"
        "from retrieval.retriever import open_index\n"
        f"hits = open_index({str(tmp_path / 'index')!r}).retrieve('how do I drain a node', k=1)\n"
        "assert hits and hits[0].source.endswith('drain.md'), hits\n"
        "heavy = sorted(m for m in ('sentence_transformers', 'sklearn', 'pandas') if m in sys.modules)\n"
        "print('heavy:', heavy)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "heavy: []" in run.stdout
