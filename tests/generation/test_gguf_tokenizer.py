"""The GGUF's own tokenizer (generation/gguf_tokenizer.py) against transformers' on the same vocabulary
and chat template: ids, text and prompts must come out the same, since prompts, n-gram drafts and the
grounding filter all work on them."""

import gc
from pathlib import Path

import pytest
from tiny_gguf import write_tiny_gguf

from generation import models
from generation.errors import ModelError
from generation.gguf_tokenizer import GgufTokenizer
from generation.llamacpp_lm import LlamaCppLM, vocabulary_tokenizer
from generation.model_store import PACKAGED
from tiny import EOS, byte_tokenizer

# a template that uses what transformers' sandbox offers: trimmed blocks, loop controls, tojson, raise_exception
TEMPLATE = (
    """{% if messages | length > 8 %}{{ raise_exception('too many turns') }}{% endif %}
{% for message in messages %}
    {% if message['role'] == 'tool' %}{% continue %}{% endif %}
<|{{ message['role'] }}|>
{{ message['content'] }}"""
    + EOS
    + """
{% if message.get('meta') %}{{ message['meta'] | tojson }}{% endif %}
{% endfor %}
{% if add_generation_prompt %}<|assistant|>
{% endif %}"""
)

TEXTS = [
    "scontrol update nodename=c042 state=resume",
    "Héllo wörld — ünïcode ✓ and emoji 🚀 in a runbook",
    "a line\n\n  indented `code` [1]\ttab",
    f"special {EOS} inside text",
    "",
]
CONVERSATION = [
    {"role": "system", "content": "Answer from the sources."},
    {"role": "user", "content": "How do I drain c042?", "meta": {"ünï": [1, "x"]}},
    {"role": "tool", "content": "skipped"},
    {"role": "assistant", "content": "Use `scontrol` [1]."},
    {"role": "user", "content": "And undo it?"},
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple:
    gguf = write_tiny_gguf(tmp_path_factory.mktemp("tok") / "t.gguf", chat_template=TEMPLATE)
    lm = LlamaCppLM(gguf, n_ctx=256)
    hf = byte_tokenizer()
    hf.chat_template = TEMPLATE
    return lm.tokenizer(), hf


@pytest.mark.parametrize("text", TEXTS)
def test_text_gets_the_ids_and_comes_back_as_transformers_gives_them(pair, text):
    gguf, hf = pair
    ids = gguf(text, add_special_tokens=False)["input_ids"]
    assert ids == hf(text, add_special_tokens=False)["input_ids"]
    for skip in (True, False):
        assert gguf.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
    cut = ids[: max(1, len(ids) // 2)]  # may end inside a UTF-8 character: U+FFFD on both
    assert gguf.decode(cut, skip_special_tokens=True) == hf.decode(cut, skip_special_tokens=True)


def test_the_chat_template_renders_the_same_prompt(pair):
    gguf, hf = pair
    for prompt in (True, False):
        text = gguf.apply_chat_template(CONVERSATION, add_generation_prompt=prompt, tokenize=False)
        assert text == hf.apply_chat_template(CONVERSATION, add_generation_prompt=prompt, tokenize=False)
        assert gguf.apply_chat_template(CONVERSATION, add_generation_prompt=prompt) == gguf.encode(text)
    assert "skipped" not in text and '{"ünï": [1, "x"]}' in text


def test_vocabulary_and_special_ids_match(pair):
    gguf, hf = pair
    assert len(gguf) == len(hf) and gguf.get_vocab() == hf.get_vocab()
    assert gguf.eos_token_id == hf.eos_token_id
    assert gguf.convert_ids_to_tokens(range(len(hf))) == hf.convert_ids_to_tokens(list(range(len(hf))))


def test_a_template_error_and_a_missing_template_are_clear(pair, tmp_path):
    gguf, _ = pair
    from jinja2.exceptions import TemplateError

    with pytest.raises(TemplateError, match="too many turns"):
        gguf.apply_chat_template([{"role": "user", "content": "x"}] * 9)
    bare = LlamaCppLM(write_tiny_gguf(Path(tmp_path) / "bare.gguf"), n_ctx=256).tokenizer()
    assert bare.chat_template is None
    with pytest.raises(ModelError, match="no chat template"):
        bare.apply_chat_template([{"role": "user", "content": "x"}])


def test_a_vocabulary_read_without_the_weights_tokenizes_as_the_loaded_model_does(tmp_path):
    """The int4 path tokenizes a packaged model with its GGUF's vocabulary alone (models.packaged_vocabulary)."""
    gguf = write_tiny_gguf(tmp_path / "t.gguf", chat_template=TEMPLATE)
    alone, loaded = vocabulary_tokenizer(gguf), LlamaCppLM(gguf, n_ctx=256).tokenizer()
    gc.collect()  # the vocabulary stays while its tokenizer lives
    for text in TEXTS:
        assert alone.encode(text) == loaded.encode(text)
        assert alone.decode(loaded.encode(text)) == loaded.decode(loaded.encode(text))
    assert alone.get_vocab() == loaded.get_vocab() and alone.eos_token_id == loaded.eos_token_id
    prompt = alone.apply_chat_template(CONVERSATION, add_generation_prompt=True)
    assert prompt == loaded.apply_chat_template(CONVERSATION, add_generation_prompt=True)
    (tmp_path / "cut.gguf").write_bytes(gguf.read_bytes()[:64])
    with pytest.raises(ModelError, match="could not read the vocabulary"):
        vocabulary_tokenizer(tmp_path / "cut.gguf")


def test_a_packaged_model_on_a_torch_path_gets_its_gguf_vocabulary_and_other_models_none(tmp_path, monkeypatch):
    gguf = write_tiny_gguf(tmp_path / "t.gguf", chat_template=TEMPLATE)
    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path / "home"))
    assert models.packaged_vocabulary("default-target") is None  # not assembled: not written again for this
    cached = tmp_path / "home" / "gguf" / PACKAGED["default-target"].gguf_name
    cached.parent.mkdir(parents=True)
    cached.write_bytes(gguf.read_bytes())
    assert isinstance(models.packaged_vocabulary("default-target"), GgufTokenizer)
    assert models.packaged_vocabulary(str(tmp_path / "my-model")) is None
    monkeypatch.setattr(models, "llamacpp_available", lambda: False)
    assert models.packaged_vocabulary("default-target") is None
