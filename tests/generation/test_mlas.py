"""The int4-mlas path: the int4 weights on ONNX Runtime's kernels, rows independent of their pass."""

import pytest
import torch
from exactness import WIDEST, assert_greedy_speculation_matches_plain, assert_widest_pass_matches_plain_steps

from generation.engine import Engine
from generation.errors import ModelError
from generation.mlas_linear import MlasLinear, from_int4, from_int8, to_mlas
from generation.numeric_path import resolve_path
from generation.quantized import Int4Linear, Int8Linear
from generation.quantized_model import MLAS, numeric_path, quantize_module_tree
from tiny import tiny_wide_head_lm


@pytest.mark.parametrize(("layer", "convert"), [(Int4Linear, from_int4), (Int8Linear, from_int8)])
def test_a_layer_keeps_its_weights_and_each_row_is_independent_of_the_rows_beside_it(layer, convert):
    generator = torch.Generator().manual_seed(0)
    weight, x = torch.randn(64, 256, generator=generator) * 0.05, torch.randn(WIDEST, 256, generator=generator)
    quantized = layer.from_float(weight, torch.randn(64, generator=generator))
    mlas = convert(quantized)
    together = mlas(x)
    alone = torch.cat([mlas(x[i : i + 1]) for i in range(WIDEST)])  # one row is padded to two inside
    assert torch.equal(together, alone)
    for rows in (2, 5, 16):
        assert torch.equal(mlas(x[:rows]), together[:rows])
    # the same weights as the torch kernel's, with int8 activations instead of bf16 ones
    reference = quantized(x)
    assert (together - reference).abs().max() < 0.02 * reference.abs().max()


@pytest.fixture(scope="module")
def mlas_model():
    return to_mlas(quantize_module_tree(tiny_wide_head_lm(0, sharpness=20.0), "int4"))


def test_every_quantized_layer_moves_and_the_path_is_named(mlas_model):
    kinds = {type(m) for m in mlas_model.modules()}
    assert MlasLinear in kinds and not kinds & {Int4Linear, Int8Linear}
    assert numeric_path(mlas_model) == MLAS


def test_a_token_decoded_plainly_and_verified_in_the_widest_pass_get_bit_identical_logits(mlas_model):
    assert_widest_pass_matches_plain_steps(mlas_model)


def test_greedy_speculation_equals_plain_decoding_on_the_mlas_path(mlas_model, tokenizer):
    draft = to_mlas(quantize_module_tree(tiny_wide_head_lm(1, sharpness=20.0), "int4"))
    assert_greedy_speculation_matches_plain(Engine(mlas_model, tokenizer, draft))


def test_the_path_is_asked_for_by_name_on_cpu_only(tmp_path, monkeypatch):
    from generation import numeric_path as paths

    cpu, cache = torch.device("cpu"), tmp_path / "calibration.json"
    assert resolve_path(MLAS, cpu, "auto", cache) == MLAS
    with pytest.raises(ModelError, match="--device cpu"):
        resolve_path(MLAS, torch.device("cuda"), "auto", cache)
    monkeypatch.setattr(paths, "mlas_available", lambda: False)
    with pytest.raises(ModelError, match=r"pip install 'specrag\[mlas\]'"):
        resolve_path(MLAS, cpu, "auto", cache)
