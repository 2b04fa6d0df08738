"""Reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009).

score(d) = sum over rankings r of w_r / (k + rank_r(d)), with 1-based ranks and weight w_r (1 unless
given: weighted RRF). It needs no score calibration between retrievers, which is why it suits
cosine similarity next to BM25.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[Hashable]], k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[Hashable, float, dict[str, int]]]:
    """Fuse named rankings (best first) into (item, fused score, {ranking name: 1-based rank}).

    `weights` scale each named ranking's contribution (missing names weigh 1).

    Ties are broken by the best single rank, then by first appearance, so the order is
    deterministic.
    """
    scores: dict[Hashable, float] = {}
    ranks: dict[Hashable, dict[str, int]] = {}
    for name, ranking in rankings.items():
        for rank, item in enumerate(ranking, start=1):
            if name in ranks.setdefault(item, {}):
                continue  # an item listed twice in one ranking counts once, at its best rank
            ranks[item][name] = rank
            scores[item] = scores.get(item, 0.0) + (weights or {}).get(name, 1.0) / (k + rank)
    order = sorted(scores, key=lambda item: (-scores[item], min(ranks[item].values())))
    return [(item, scores[item], ranks[item]) for item in order]
