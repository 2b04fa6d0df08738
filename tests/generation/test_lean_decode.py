"""The lean decoding pass: the model's own logits and cache, bit for bit, without transformers' glue."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen2 import modeling_qwen2

from generation.cached_lm import CachedLM
from generation.invariant_attention import MAX_ROWS, use_invariant_attention
from generation.lean_decode import lean_forward, supports
from generation.quantized_model import quantize_module_tree
from tiny import tiny_lm, tiny_wide_head_lm


def tiny(model_class: type, config_class: type, seed: int):
    """A random 2-layer model of another family than tiny.py's Qwen2."""
    torch.manual_seed(seed)
    sizes = {"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2}
    config = config_class(vocab_size=257, num_hidden_layers=2, max_position_embeddings=512, **sizes)
    return model_class(config).eval()


MODELS = {
    "qwen2 int4": lambda: quantize_module_tree(tiny_wide_head_lm(0, sharpness=20.0), "int4"),
    "qwen2 int8": lambda: quantize_module_tree(tiny_wide_head_lm(0, sharpness=20.0), "int8"),
    "qwen2 float32": lambda: use_invariant_attention(tiny_lm(0)),
    "llama int4": lambda: quantize_module_tree(tiny(LlamaForCausalLM, LlamaConfig, 3), "int4"),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request):
    return MODELS[request.param]()


@pytest.mark.parametrize("rows", [1, 2, 5, MAX_ROWS])
def test_a_lean_pass_gives_the_models_own_logits_and_cache_bit_for_bit(model, rows):
    assert supports(model)
    prompt = [int(t) for t in torch.randint(0, 257, (40,), generator=torch.Generator().manual_seed(rows))]
    own, lean = CachedLM(model, keep_snapshot=False), CachedLM(model, keep_snapshot=False)
    own.lean = False
    own.prefill(prompt), lean.prefill(prompt)
    new = prompt[3 : 3 + rows]
    assert torch.equal(own.extend(new), lean.extend(new))
    own.crop(41), lean.crop(41)  # roll back a rejected draft, then decode on
    assert torch.equal(own.extend([7], last_only=True), lean.extend([7], last_only=True))
    for mine, theirs in zip(own.cache.layers, lean.cache.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)


def test_decoding_passes_skip_the_decoder_layers_forward_and_prefill_keeps_it(monkeypatch):
    model = quantize_module_tree(tiny_wide_head_lm(0), "int4")
    calls = []
    forward = modeling_qwen2.Qwen2DecoderLayer.forward
    monkeypatch.setattr(
        modeling_qwen2.Qwen2DecoderLayer, "forward", lambda self, *a, **k: calls.append(1) or forward(self, *a, **k)
    )
    lm = CachedLM(model, keep_snapshot=False)
    lm.prefill(list(range(MAX_ROWS + 1)))  # too wide for row-wise attention: the model's forward
    assert len(calls) == 2
    lm.extend([1, 2, 3])
    lm.extend(list(range(MAX_ROWS)))
    assert len(calls) == 2
    with pytest.raises(ValueError, match="at most"):
        lean_forward(model, torch.zeros(1, MAX_ROWS + 1, dtype=torch.long), lm.cache, True)


def test_models_whose_forward_it_does_not_reproduce_keep_their_own():
    assert not supports(tiny_lm(0))  # transformers' attention, not the row-wise one
    hooked = use_invariant_attention(tiny_lm(0))
    hooked.model.layers[1].mlp.register_forward_hook(lambda *args: None)
    assert not supports(hooked)  # calling forward directly would skip the hook
    qwen3 = tiny(Qwen3ForCausalLM, Qwen3Config, 0)
    assert not supports(use_invariant_attention(qwen3))  # q and k norms: glue not written out here
    assert not CachedLM(qwen3).lean
