"""Tiny models, a fake-embedder index over the retrieval fixture docs, and a copilot factory for `specrag eval`."""

import copy
import sys
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS / "generation"))
sys.path.insert(0, str(TESTS / "retrieval"))

from retrieval_fakes import FakeEmbedder  # noqa: E402
from tiny import byte_tokenizer, tiny_lm  # noqa: E402

from app.copilot import Copilot, CopilotOptions, LoadedEngine  # noqa: E402
from generation.engine import Engine  # noqa: E402

FIXTURE_DOCS = TESTS / "retrieval" / "fixtures" / "docs"


def tiny_loaded() -> LoadedEngine:
    """A peaky tiny target (it repeats itself, so copies get accepted) and a noisy copy as draft."""
    target = tiny_lm(seed=0, sharpness=20.0)
    draft = copy.deepcopy(target)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in draft.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.02)
    return LoadedEngine(Engine(target, byte_tokenizer(), draft), "/models/tiny-target", "/models/tiny-draft")


def build_index(index_dir: Path) -> None:
    from retrieval.ingest import ingest

    ingest([FIXTURE_DOCS], index_dir, embedder=FakeEmbedder())


def factory(index_dir: Path, loaded: LoadedEngine | None):
    """A copilot_factory for app.eval_cmd.run: tiny models (unless retrieval only) over the fake index."""
    from retrieval.retriever import open_index

    def make(options: CopilotOptions, retrieval_only: bool) -> Copilot:
        retriever = open_index(index_dir, embedder=FakeEmbedder())
        return Copilot(None if retrieval_only else loaded, options, retriever)

    return make


@pytest.fixture(scope="session")
def fake_index(tmp_path_factory) -> Path:
    index_dir = tmp_path_factory.mktemp("eval-index") / "index"
    build_index(index_dir)
    return index_dir


@pytest.fixture(scope="session")
def loaded_tiny() -> LoadedEngine:
    return tiny_loaded()
