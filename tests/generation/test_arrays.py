"""generation/arrays.py: llama.cpp's numpy logits get the arithmetic torch's tensors get, and sampling
and verification on them keep their distributions (the engine runs on numpy in a torch-free process)."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from generation import arrays
from generation.sampling import SamplingParams, logits_to_probs, sample
from generation.verifier import verify

ALPHA = 1e-4  # each chi-square test fails falsely with this probability

PARAMS = [
    SamplingParams(),
    SamplingParams(temperature=0.7),
    SamplingParams(temperature=1.3, top_k=5),
    SamplingParams(temperature=0.5, top_p=0.9),
    SamplingParams(temperature=0.9, top_k=12, top_p=0.6),
]


@pytest.mark.parametrize("params", PARAMS)
def test_numpy_logits_are_warped_as_torch_warps_them(params):
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(1)) * 4
    expected = logits_to_probs(logits, params).numpy()
    got = logits_to_probs(logits.numpy(), params)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    assert np.allclose(got, expected, atol=1e-6)
    assert ((got > 0) == (expected > 0)).all()  # the same support, not only close values


def test_top_indices_log_softmax_and_masks_agree_with_torch():
    row = torch.randn(1000, generator=torch.Generator().manual_seed(2))
    assert arrays.top_indices(row.numpy(), 40) == arrays.top_indices(row, 40) == torch.topk(row, 40).indices.tolist()
    assert arrays.top_two_gap(row.numpy()) == pytest.approx(arrays.top_two_gap(row))
    assert np.allclose(arrays.log_softmax(row.numpy()), row.log_softmax(-1).numpy(), atol=1e-5)
    kept = arrays.only(row.numpy(), [3, 7])
    assert np.isfinite(kept).sum() == 2 and kept[3] == row[3].item()
    assert np.array_equal(arrays.one_hot_argmax(row.numpy()), arrays.one_hot_argmax(row).numpy())


def test_numpy_sampling_follows_the_distribution_and_never_draws_a_zero():
    p = np.array([0.1, 0.0, 0.4, 0.05, 0.3, 0.15], dtype=np.float32)
    generator = np.random.default_rng(0)
    n = 20000
    counts = np.bincount([sample(p, generator) for _ in range(n)], minlength=len(p))
    assert counts[1] == 0
    support = p > 0
    assert chisquare(counts[support], p[support] * n).pvalue > ALPHA


@pytest.mark.parametrize("point_mass", [False, True])
def test_numpy_verification_keeps_the_target_distribution(point_mass):
    p = np.array([0.1, 0.4, 0.05, 0.3, 0.15], dtype=np.float32)
    q = np.array([0.3, 0.1, 0.3, 0.2, 0.1], dtype=np.float32)  # very different from p
    generator = np.random.default_rng(3)
    n = 20000
    counts = np.zeros(len(p))
    for _ in range(n):
        drafted = 2 if point_mass else sample(q, generator)  # an unlikely copy, or a model draft
        out = verify(np.stack([p, p]), [drafted], [None if point_mass else q], generator, greedy=False)
        counts[out[0]] += 1
    assert chisquare(counts, p * n).pvalue > ALPHA


def test_generators_follow_the_runner():
    class NumpyRunner:
        array_library = "numpy"

    class TorchRunner:
        device = torch.device("cpu")

    assert isinstance(arrays.new_generator(NumpyRunner(), 0), np.random.Generator)
    assert isinstance(arrays.new_generator(TorchRunner(), 0), torch.Generator)
    assert arrays.random_tokens(NumpyRunner(), 100, 5, seed=1) == arrays.random_tokens(NumpyRunner(), 100, 5, seed=1)
    expected = torch.randint(0, 100, (5,), generator=torch.Generator().manual_seed(1)).tolist()
    assert arrays.random_tokens(TorchRunner(), 100, 5, seed=1) == expected  # torch runners keep their tokens
