"""Exact verification of a draft against the target distributions.

`verify` is a pure function: given the target distributions p for the k+1 positions of
one forward pass and a draft of k tokens with their proposal distributions q (None rows
mean a point mass, q(x) = 1, as for n-gram copies), it returns the accepted draft prefix
followed by one token from the target: the correction at the first rejection, or the
bonus token when the whole draft is accepted.

Sampling (Leviathan et al. 2023, Chen et al. 2023): accept x_i with probability
min(1, p_i(x_i) / q_i(x_i)); on rejection draw from norm(max(0, p_i - q_i)). The emitted
tokens are then distributed exactly as sequential sampling from p. Under greedy, p rows
are one-hot and the rule reduces to "keep while the draft equals the target argmax", which the
engine takes from the logits themselves.
"""

from __future__ import annotations

from generation import arrays
from generation.arrays import Generator, Logits
from generation.sampling import sample


def verify(
    target_probs: Logits,
    draft_tokens: list[int],
    draft_probs: list[Logits | None],
    generator: Generator,
    greedy: bool,
) -> list[int]:
    """Return accepted draft tokens plus one target token (length 1..k+1)."""
    k = len(draft_tokens)
    if target_probs.shape[0] != k + 1 or len(draft_probs) != k:
        raise ValueError(
            f"need k+1={k + 1} target rows and k={k} draft rows, got {target_probs.shape[0]}, {len(draft_probs)}"
        )
    if greedy:
        return _verify_greedy(target_probs, draft_tokens)
    accepted: list[int] = []
    for i, (token, q) in enumerate(zip(draft_tokens, draft_probs, strict=True)):
        p = target_probs[i]
        q_x = 1.0 if q is None else float(q[token])
        p_x = float(p[token])
        u = arrays.uniform(generator)
        if q_x > 0 and u * q_x < p_x:  # u < p/q without dividing
            accepted.append(token)
            continue
        accepted.append(sample(_residual(p, token, q), generator))
        return accepted
    accepted.append(sample(target_probs[k], generator))
    return accepted


def _residual(p: Logits, token: int, q: Logits | None) -> Logits:
    """norm(max(0, p - q)); for a point mass at `token` this is p with `token` removed."""
    residual = arrays.without(p, token) if q is None else arrays.positive_part(p - q)
    total = residual.sum()
    if total <= 0:  # p <= q everywhere means p == q: rejection had probability 0
        return p
    return residual / total


def _verify_greedy(target_rows: Logits, draft_tokens: list[int]) -> list[int]:
    """Keep the draft while it equals each row's argmax; rows may be one-hot probabilities or the logits."""
    targets = target_rows.argmax(-1).tolist()
    accepted: list[int] = []
    for token, target in zip(draft_tokens, targets, strict=False):
        if token != target:
            break
        accepted.append(token)
    accepted.append(targets[len(accepted)])
    return accepted
