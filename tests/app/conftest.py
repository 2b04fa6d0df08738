"""Tiny models behind `app.copilot.loading.load_engine`, so every front end runs offline in seconds."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "generation"))

from app.copilot import loading
from generation.engine import Engine
from tiny import byte_tokenizer, tiny_target_and_draft


@pytest.fixture(scope="session")
def tiny_models():
    """A peaky tiny target (it repeats itself, so copies get accepted) and a noisy copy as draft."""
    return (*tiny_target_and_draft(), byte_tokenizer())


@pytest.fixture
def tiny_engine(monkeypatch, tiny_models, tmp_path):
    """Every command builds its engine from the tiny models; no retrieval index is found."""
    target, draft, tokenizer = tiny_models

    def load_engine(models):
        use_draft = models.draft is not None
        return loading.LoadedEngine(
            Engine(target, tokenizer, draft if use_draft else None),
            "/models/tiny-target",
            "/models/tiny-draft" if use_draft else None,
        )

    monkeypatch.setattr(loading, "load_engine", load_engine)
    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path / "specrag-home"))
    return target, draft, tokenizer
