from __future__ import annotations

import pytest

from retrieval.fusion import reciprocal_rank_fusion


def test_rrf_scores_are_sums_of_reciprocal_ranks():
    fused = reciprocal_rank_fusion({"dense": ["a", "b", "c"], "bm25": ["c", "a"]}, k=60)
    scores = {item: score for item, score, _ in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert [item for item, _, _ in fused] == ["a", "c", "b"]


def test_rrf_reports_each_rankings_rank():
    fused = reciprocal_rank_fusion({"dense": ["x", "y"], "bm25": ["y"]})
    assert dict((item, ranks) for item, _, ranks in fused) == {"x": {"dense": 1}, "y": {"dense": 2, "bm25": 1}}


def test_agreement_beats_a_single_first_place():
    fused = reciprocal_rank_fusion({"dense": ["solo", "both"], "bm25": ["both"]})
    assert fused[0][0] == "both"


def test_ties_break_by_best_single_rank_then_first_seen():
    fused = reciprocal_rank_fusion({"dense": ["a", "b"], "bm25": ["b", "a"]})
    assert [item for item, _, _ in fused] == ["a", "b"]


def test_duplicates_in_one_ranking_count_once():
    fused = reciprocal_rank_fusion({"dense": ["a", "a", "b"]}, k=0)
    assert fused[0] == ("a", 1.0, {"dense": 1})


def test_empty_rankings_fuse_to_nothing():
    assert reciprocal_rank_fusion({"dense": [], "bm25": []}) == []


def test_weights_scale_each_rankings_share():
    fused = reciprocal_rank_fusion({"dense": ["d", "x"], "bm25": ["b", "x"]}, k=60, weights={"dense": 2.0})
    scores = {item: score for item, score, _ in fused}
    assert scores["d"] == pytest.approx(2 / 61) and scores["b"] == pytest.approx(1 / 61)
    assert scores["x"] == pytest.approx(2 / 62 + 1 / 62)
    assert [item for item, _, _ in fused] == ["x", "d", "b"]


def test_hybrid_retriever_weighs_dense_twice_by_default():
    from retrieval.retriever import FUSION_WEIGHTS

    assert FUSION_WEIGHTS == {"dense": 2.0, "bm25": 1.0}
