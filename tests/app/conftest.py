"""Tiny models behind `app.copilot.loading.load_engine`, so every front end runs offline in seconds."""

import copy
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "generation"))

from app.copilot import loading
from generation.engine import Engine
from tiny import byte_tokenizer, tiny_lm


@pytest.fixture(scope="session")
def tiny_models():
    """A peaky tiny target (it repeats itself, so copies get accepted) and a noisy copy as draft."""
    target = tiny_lm(seed=0, sharpness=20.0)
    draft = copy.deepcopy(target)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in draft.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.02)
    return target, draft, byte_tokenizer()


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
