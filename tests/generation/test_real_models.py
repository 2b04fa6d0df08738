"""Checks on the real default models (slow: deselected unless `-m slow`; needs `.[models]`)."""

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RUNBOOK = Path(__file__).resolve().parents[2] / "corpora" / "runbooks" / "job-exit-codes.md"


def runbook_prompt(tokenizer, question: str) -> tuple[list[int], list[list[int]]]:
    """The pipeline's prompt over the runbook's first 12 paragraphs, and those paragraphs as copy sources."""
    from app.copilot import Passage
    from app.copilot.prompting import build_messages, encode_chunks, encode_prompt

    texts = [p for p in RUNBOOK.read_text().split("\n\n") if p.strip()][:12]
    passages = [Passage(i + 1, text, RUNBOOK.name, "Job exit codes", "") for i, text in enumerate(texts)]
    return encode_prompt(tokenizer, build_messages(question, passages)), encode_chunks(tokenizer, texts)


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
    from generation.engine import GenerationConfig

    models, engine = real
    prompt, chunks = runbook_prompt(models.tokenizer, "What does exit code 137 mean and what should I do?")
    plain = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=48, speculation="none"))
    for mode in ("ngram", "model", "hybrid"):
        result = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=48, speculation=mode))
        assert result.token_ids == plain.token_ids, mode
        if not engine.verifies_drafts:  # auto chose llamacpp-f16
            assert result.stats.tokens_per_pass == 1.0, mode
        # copies of the runbook pay on every speculative path; a model draft may not: on llama.cpp here a 2-row
        # pass costs 1.98x a 1-row one, and the policy rightly declines drafts that would cost more than they save
        elif mode != "model":
            assert result.stats.tokens_per_pass > 1.0, mode


def test_the_gates_judge_on_the_default_target_says_yes_to_the_page_and_no_off_topic(real):
    from app.copilot import Copilot, Passage, gate
    from app.copilot.loading import LoadedEngine

    models, engine = real
    copilot = Copilot(LoadedEngine(engine, models.target_path, None, target="default-target"))
    texts = [p for p in RUNBOOK.read_text().split("\n\n") if p.strip()][:6]
    passages = [Passage(i + 1, text, RUNBOOK.name, "Job exit codes", "") for i, text in enumerate(texts)]
    threshold = gate.JUDGE_THRESHOLDS["default-target"]
    assert copilot.judge("What does exit code 137 mean?", passages) >= threshold
    assert copilot.judge("What is the Wi-Fi password for the operations room?", passages) < threshold


# torch's, ONNX Runtime's and llama.cpp's kernels
@pytest.fixture(scope="module", params=["int4", "int4-mlas", "llamacpp"])
def real_fast_path(monkeypatch_module, request):
    monkeypatch_module.setenv("SPECRAG_HOME", os.environ["SPECRAG_REAL_HOME"])
    from generation.engine import Engine
    from generation.models import load_models

    models = load_models(quant=request.param)
    return models, Engine(models.target, models.tokenizer, models.draft)


def test_on_each_fast_path_a_plain_step_and_the_widest_verification_pass_give_bit_identical_logits(real_fast_path):
    import numpy as np

    def rows(logits) -> np.ndarray:  # torch paths give tensors, llama.cpp numpy arrays
        return np.array(logits if isinstance(logits, np.ndarray) else logits.float().numpy(), copy=True)

    models, engine = real_fast_path
    lm = engine.target
    widest = min(lm.max_pass_rows, 17)  # the last token plus the engine's widest draft (16, or 6 on llama.cpp)
    prompt, _ = runbook_prompt(models.tokenizer, "What does exit code 137 mean?")
    lm.reset()
    lm.extend(prompt[:-20], last_only=True)
    new = prompt[-20 : -20 + widest]
    plain = np.concatenate([rows(lm.extend([token])[-1:]) for token in new])
    lm.crop(len(prompt) - 20)
    assert np.array_equal(rows(lm.extend(new)), plain)


def test_on_the_int4_path_lean_passes_give_transformers_own_logits_for_target_and_draft(monkeypatch_module):
    import torch

    from generation.cached_lm import CachedLM
    from generation.models import load_models

    monkeypatch_module.setenv("SPECRAG_HOME", os.environ["SPECRAG_REAL_HOME"])
    models = load_models(quant="int4")
    prompt, _ = runbook_prompt(models.tokenizer, "What does exit code 137 mean?")
    for model in (models.target, models.draft):
        own, lean = CachedLM(model, keep_snapshot=False), CachedLM(model, keep_snapshot=False)
        own.lean = False
        assert lean.lean  # the packaged models' layers are ones the lean pass writes out
        own.prefill(prompt[:-17]), lean.prefill(prompt[:-17])
        assert torch.equal(own.extend(prompt[-17:]), lean.extend(prompt[-17:]))
        assert torch.equal(own.extend(prompt[5:6], last_only=True), lean.extend(prompt[5:6], last_only=True))


def test_the_gguf_tokenizer_matches_transformers_conversion_of_the_packaged_target(monkeypatch_module):
    """llama.cpp tokenizes for the llama.cpp paths (gguf_tokenizer.py); transformers' conversion of the same
    GGUF tokenized before: the corpora, prompts and decoded text must come out the same."""
    monkeypatch_module.setenv("SPECRAG_HOME", os.environ["SPECRAG_REAL_HOME"])
    from transformers import AutoTokenizer

    from app.copilot import Passage
    from app.copilot.prompting import build_messages, encode_prompt
    from generation.llamacpp_lm import LlamaCppLM, vocabulary_tokenizer
    from generation.model_store import gguf_file

    gguf = gguf_file("default-target")
    ours = LlamaCppLM(gguf, n_ctx=256).tokenizer()
    theirs = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    corpora = Path(__file__).resolve().parents[2] / "corpora"
    texts = [p for f in sorted(corpora.rglob("*.md")) for p in f.read_text().split("\n\n") if p.strip()]
    assert len(texts) > 100
    for text in texts:
        ids = theirs(text, add_special_tokens=False)["input_ids"]
        assert ours(text)["input_ids"] == ids
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)
    passages = [Passage(i + 1, text, "runbook.md", "Runbook", "") for i, text in enumerate(texts[:6])]
    history = [{"role": "assistant", "content": "Use `scontrol` [1]."}, {"role": "user", "content": "And <|im_end|>?"}]
    for messages in (build_messages("How do I drain a node?", passages), history):
        assert encode_prompt(ours, messages) == encode_prompt(theirs, messages)
    assert ours.get_vocab() == theirs.get_vocab() and ours.eos_token_id == theirs.eos_token_id
    alone = vocabulary_tokenizer(gguf)  # the int4 path's: the vocabulary without the weights
    assert all(alone(text)["input_ids"] == ours(text)["input_ids"] for text in texts)


def test_on_each_fast_path_every_speculative_mode_matches_plain_greedy(real_fast_path):
    from generation.engine import GenerationConfig

    models, engine = real_fast_path
    prompt, chunks = runbook_prompt(models.tokenizer, "What does exit code 137 mean and what should I do?")
    plain = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=64, speculation="none"))
    for mode in ("ngram", "model", "hybrid"):
        for length in (None, min(16, engine.target.max_pass_rows - 1)):
            config = GenerationConfig(max_new_tokens=64, speculation=mode, draft_length=length)
            assert engine.complete(prompt, chunks, config).token_ids == plain.token_ids, (mode, length)


def test_on_each_fast_path_answers_decoded_through_the_code_filter_match_plain_greedy(real_fast_path):
    """The filter that keeps code to the sources (app/copilot/copied_code.py) sees every row alike."""
    from app.copilot.copied_code import CopiedCode
    from generation.engine import GenerationConfig

    models, engine = real_fast_path
    question = "A job ended with exit code 137. Which command shows what happened to it?"
    prompt, chunks = runbook_prompt(models.tokenizer, question)
    texts = [models.tokenizer.decode(chunk) for chunk in chunks]

    def complete(**config):
        code = CopiedCode(models.tokenizer, texts, question)
        result = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=64, **config), token_filter=code)
        return result.token_ids

    plain = complete(speculation="none")
    for mode in ("ngram", "hybrid"):
        assert complete(speculation=mode) == plain, mode
