"""The draft-length policy: cost shape, acceptance estimates, and the choice of k."""

import json

import pytest

from generation.cached_lm import CachedLM
from generation.calibration import cached_relative_costs
from generation.drafters.policy import (
    Acceptance,
    ConfidenceCalibration,
    PassCost,
    best_draft_length,
    best_prefix,
    expected_tokens,
    worth_drafting_on,
)


def test_expected_tokens_counts_the_bonus_token():
    assert expected_tokens(0.0, 5) == 1.0
    assert expected_tokens(1.0, 5) == 6.0
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)


def test_pass_cost_interpolates_the_shape_and_follows_the_level():
    cost = PassCost({1: 1.0, 2: 1.0, 4: 2.0, 8: 2.4})
    cost.record(1, 0.5)
    assert cost(2) == pytest.approx(0.5)
    assert cost(3) == pytest.approx(0.75)  # halfway between r(2) = 1 and r(4) = 2
    assert cost(16) == pytest.approx(0.5 * 3.2)  # the last segment continued
    for _ in range(100):  # the machine got busier: every size gets dearer together
        cost.record(4, 2.0)
    assert cost(1) == pytest.approx(1.0, rel=1e-3)


def test_cheap_two_token_pass_is_used_and_costly_long_drafts_are_not():
    cost = PassCost({1: 1.0, 2: 1.02, 3: 1.6, 4: 2.0, 8: 2.6})
    cost.record(1, 0.5)
    assert best_draft_length(0.3, cost, 0.0, 8)[0] == 1  # 1.3 tokens for ~the price of 1
    assert best_draft_length(0.01, cost, 0.0, 8)[0] == 0  # guesses that almost always fail do not pay
    assert best_draft_length(0.97, cost, 0.0, 8)[0] == 8  # near-certain copies: go long
    assert best_draft_length(0.7, cost, 10.0, 8)[0] == 0  # a draft step dearer than the pass never pays


def test_acceptance_counts_a_draft_as_trials_up_to_the_first_miss():
    stats = Acceptance(accepted=0.0, trials=0.0, decay=1.0)
    stats.update(drafted=4, accepted=2)  # 2 hits, then a miss
    stats.update(drafted=3, accepted=3)  # 3 hits, no miss
    assert stats.rate == pytest.approx(5 / 6)


def test_calibration_is_measured_once_and_cached(target, tmp_path, monkeypatch):
    lm = CachedLM(target)
    path = tmp_path / "calibration.json"
    first = cached_relative_costs(lm, path)
    assert first[1] == 1.0 and set(first) >= {1, 2, 4, 8, 16}
    assert lm.length == 0
    monkeypatch.setattr("generation.calibration.measure_relative_costs", lambda *a, **k: pytest.fail("remeasured"))
    assert cached_relative_costs(lm, path) == first
    assert len(json.loads(path.read_text())) == 1


def test_confidence_calibration_learns_that_confident_drafts_miss():
    calibration = ConfidenceCalibration()
    assert calibration(0.95) == pytest.approx(0.95)  # the prior trusts the draft
    for _ in range(50):
        calibration.update([0.95, 0.95], accepted=0)  # but the target keeps disagreeing
    assert calibration(0.95) < 0.2
    assert calibration(0.35) == pytest.approx(0.35)  # other bins untouched


def test_best_prefix_stops_where_the_next_token_no_longer_pays():
    cost = PassCost({1: 1.0, 2: 1.0, 3: 1.0, 4: 2.0, 8: 2.2})
    cost.record(1, 1.0)
    # the first two tokens ride free on the pass; the third would double its cost for +0.3 tokens
    assert best_prefix([0.9, 0.8, 0.3, 0.1], cost, sunk_seconds=0.2) == 2
    assert best_prefix([0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.93], cost, sunk_seconds=0.2) == 7
    assert best_prefix([], cost, sunk_seconds=0.0) == 0


def test_drafting_looks_past_the_stair_in_the_pass_cost():
    cost = PassCost({1: 1.0, 2: 1.0, 3: 1.0, 4: 1.5, 16: 2.1})
    cost.record(1, 1.0)
    drafted = [0.9, 0.81]  # P(the first i tokens all survive)
    # sending 2 now: 2.71 tokens / 1.04 s; one more token alone: 3.44 / 1.56 s, worse ...
    assert not worth_drafting_on(drafted, 0.9, cost, step=0.02, room=1)
    # ... but ten more: 7.17 / 2.19 s, better
    assert worth_drafting_on(drafted, 0.9, cost, step=0.02, room=12)
    # an unsure next token, a costly draft model, or no room left: verify now
    assert not worth_drafting_on(drafted, 0.3, cost, step=0.02, room=12)
    assert not worth_drafting_on(drafted, 0.9, cost, step=1.0, room=12)
    assert not worth_drafting_on(drafted, 0.9, cost, step=0.02, room=0)
    # inside the flat part of the staircase the next token is nearly free
    assert worth_drafting_on([0.6], 0.6, cost, step=0.05, room=1)


def test_softened_acceptance_keeps_the_rate_but_yields_to_new_evidence():
    learned = Acceptance(accepted=10.0, trials=100.0)  # a long record of misses
    soft = learned.softened(8.0)
    assert soft.rate == pytest.approx(learned.rate)
    for _ in range(5):
        soft.update(4, 4)
        learned.update(4, 4)
    assert soft.rate > 0.6 > learned.rate  # a few good drafts revise the softened copy, not the record
