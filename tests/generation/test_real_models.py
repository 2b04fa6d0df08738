"""Checks on the real default models (slow: deselected unless `-m slow`; needs `.[models]`)."""

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RUNBOOK = Path(__file__).resolve().parents[2] / "corpora" / "runbooks" / "job-exit-codes.md"


@pytest.fixture(scope="module")
def real(monkeypatch_module):
    # the session fixture isolates the cache; the real models live in the user's cache
    monkeypatch_module.setenv("SPECRAG_HOME", os.environ["SPECRAG_REAL_HOME"])
    from generation.engine import Engine
    from generation.models import load_models

    models = load_models()
    return models, Engine(models.target, models.tokenizer, models.draft)


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def test_every_speculative_mode_matches_plain_greedy_on_a_runbook_question(real):
    from app.copilot.prompting import build_messages, encode_chunks, encode_prompt
    from generation.engine import GenerationConfig

    models, engine = real
    passages = [p for p in RUNBOOK.read_text().split("\n\n") if p.strip()][:12]
    messages = build_messages("What does exit code 137 mean and what should I do?", passages)
    prompt = encode_prompt(models.tokenizer, messages)
    chunks = encode_chunks(models.tokenizer, passages)
    plain = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=48, speculation="none"))
    for mode in ("ngram", "model", "hybrid"):
        result = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=48, speculation=mode))
        assert result.token_ids == plain.token_ids, mode
        assert result.stats.tokens_per_pass > 1.0, mode
