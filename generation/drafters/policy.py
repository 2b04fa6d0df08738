"""Choosing the draft length from measured costs and observed acceptance.

A draft of k tokens whose tokens are each accepted with probability a (given the ones
before were) yields E(k) = (1 - a^(k+1)) / (1 - a) tokens per target pass, bonus or
correction included. It costs one target pass over k+1 tokens, c(k+1), plus k draft
steps of d seconds each (d = 0 for copies). We pick the k in 0..k_max that maximises
E(k) / (c(k+1) + k d). k = 0 is a plain decoding step.

c(n) is learned online as a + b n from the engine's own timed passes (exponentially
forgotten least squares), because the shape of c depends on the backend: on a CPU a
16-token pass can cost 1.2x or 8x a 1-token pass depending on the matmul kernel.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Acceptance:
    """Per-token acceptance estimate with a Beta-like prior, exponentially forgotten."""

    accepted: float
    trials: float
    decay: float = 0.98

    @property
    def rate(self) -> float:
        return min(self.accepted / self.trials, 0.999)

    def update(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        # a draft is a run of Bernoulli trials that stops at the first miss
        trials = accepted + (1 if accepted < drafted else 0)
        self.accepted = self.decay * self.accepted + accepted
        self.trials = self.decay * self.trials + trials


class PassCost:
    """Seconds for a target pass over n tokens, fitted as a + b n.

    Weighted least squares over the observed passes (exponentially forgotten) plus a
    ridge term pulling b towards `slope` * a, so that with only 1-token passes observed
    (plain stretches) the line keeps a sensible relative slope instead of one extrapolated
    from an outlier.
    """

    def __init__(self, slope: float = 0.08, prior_weight: float = 4.0, decay: float = 0.97) -> None:
        self.slope, self.prior_weight, self.decay = slope, prior_weight, decay
        self.sw = self.sx = self.sy = self.sxx = self.sxy = 0.0
        self._a, self._b = 1.0, slope

    def record(self, n_tokens: int, seconds: float) -> None:
        d = self.decay
        self.sw, self.sx, self.sy = d * self.sw + 1, d * self.sx + n_tokens, d * self.sy + seconds
        self.sxx, self.sxy = d * self.sxx + n_tokens**2, d * self.sxy + n_tokens * seconds
        self._solve()

    def __call__(self, n_tokens: int) -> float:
        return max(self._a + self._b * n_tokens, 1e-9)

    def _solve(self) -> None:
        # normal equations of sum w (y - a - b n)^2 + lam (b - rho a)^2
        lam, rho = self.prior_weight, self.slope
        m11, m12, m22 = self.sw + lam * rho * rho, self.sx - lam * rho, self.sxx + lam
        det = m11 * m22 - m12 * m12
        if det <= 1e-12:
            return
        a = (self.sy * m22 - self.sxy * m12) / det
        b = (m11 * self.sxy - m12 * self.sy) / det
        if b < 0:  # cost never decreases with more tokens: refit a alone with b = 0
            a, b = self.sy / self.sw, 0.0
        self._a, self._b = max(a, 1e-9), b


def expected_tokens(alpha: float, k: int) -> float:
    """Tokens emitted per pass for a k-token draft with per-token acceptance alpha."""
    if alpha >= 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def best_draft_length(alpha: float, cost: PassCost, draft_step: float, k_max: int) -> tuple[int, float]:
    """(k, tokens per second) maximising the expected rate; k = 0 means do not draft."""
    best = (0, 1.0 / cost(1))
    for k in range(1, k_max + 1):
        rate = expected_tokens(alpha, k) / (cost(k + 1) + k * draft_step)
        if rate > best[1]:
            best = (k, rate)
    return best
