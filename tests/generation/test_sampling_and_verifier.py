"""Unit tests of the shared warping and the pure verifier, on handcrafted distributions."""

import pytest
import torch
from scipy.stats import chisquare

from generation.sampling import SamplingParams, logits_to_probs
from generation.verifier import verify

# Every chi-square test below fails falsely with probability 1e-4 (it tests at that level).
ALPHA = 1e-4


def test_temperature_zero_is_one_hot_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 2.9, 0.0]])
    probs = logits_to_probs(logits, SamplingParams(temperature=0.0))
    assert probs.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


def test_top_k_and_top_p_keep_the_right_support():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    top_k = logits_to_probs(logits, SamplingParams(temperature=1.0, top_k=2))
    assert torch.allclose(top_k, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    # top_p = 0.8: 0.5 + 0.3 reaches 0.8, so the third token is dropped
    top_p = logits_to_probs(logits, SamplingParams(temperature=1.0, top_p=0.8))
    assert torch.allclose(top_p, torch.tensor([0.625, 0.375, 0.0, 0.0]))
    top_p_edge = logits_to_probs(logits, SamplingParams(temperature=1.0, top_p=0.81))
    assert top_p_edge[2] > 0 and top_p_edge[3] == 0


@pytest.mark.parametrize("bad", [dict(temperature=-1.0), dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-2)])
def test_invalid_sampling_params_are_refused(bad):
    with pytest.raises(ValueError):
        SamplingParams(**bad)


def test_greedy_verification_keeps_the_agreeing_prefix_and_corrects():
    targets = [3, 1, 4, 1]
    p = torch.nn.functional.one_hot(torch.tensor(targets), 6).float()
    assert verify(p, [3, 1, 5], [None] * 3, None, greedy=True) == [3, 1, 4]
    assert verify(p, [3, 1, 4], [None] * 3, None, greedy=True) == [3, 1, 4, 1]  # bonus token
    assert verify(p[:1], [], [], None, greedy=True) == [3]  # empty draft = plain step


def _first_token_counts(p, q, n, point_mass_token=None, seed=0):
    generator = torch.Generator().manual_seed(seed)
    counts = torch.zeros(p.shape[-1])
    for _ in range(n):
        if point_mass_token is None:
            x = int(torch.multinomial(q, 1, generator=generator))
            out = verify(torch.stack([p, p]), [x], [q], generator, greedy=False)
        else:
            out = verify(torch.stack([p, p]), [point_mass_token], [None], generator, greedy=False)
        counts[out[0]] += 1
    return counts


def test_rejection_sampling_first_token_follows_the_target_for_model_drafts():
    p = torch.tensor([0.1, 0.4, 0.05, 0.3, 0.15])
    q = torch.tensor([0.3, 0.1, 0.3, 0.2, 0.1])  # very different from p
    n = 20000
    counts = _first_token_counts(p, q, n)
    assert chisquare(counts.numpy(), (p * n).numpy()).pvalue > ALPHA


def test_rejection_sampling_first_token_follows_the_target_for_point_mass_drafts():
    p = torch.tensor([0.1, 0.4, 0.05, 0.3, 0.15])
    n = 20000
    for drafted in (1, 2):  # a likely and an unlikely copy
        counts = _first_token_counts(p, None, n, point_mass_token=drafted, seed=drafted)
        assert chisquare(counts.numpy(), (p * n).numpy()).pvalue > ALPHA


def test_draft_equal_to_target_is_always_accepted():
    p = torch.tensor([0.2, 0.5, 0.3])
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        x = int(torch.multinomial(p, 1, generator=generator))
        out = verify(torch.stack([p, p]), [x], [p], generator, greedy=False)
        assert out[0] == x and len(out) == 2


def test_verify_checks_shapes():
    with pytest.raises(ValueError):
        verify(torch.ones(2, 3) / 3, [0, 1], [None, None], None, greedy=True)
