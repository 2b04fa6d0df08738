"""Choosing the draft length from measured costs and observed acceptance.

A draft of k tokens whose tokens are each accepted with probability a (given the ones
before were) yields E(k) = (1 - a^(k+1)) / (1 - a) tokens per target pass, bonus or
correction included. It costs one target pass over k+1 tokens, c(k+1), plus k draft
steps of d seconds each (d = 0 for copies). We pick the k in 0..k_max that maximises
E(k) / (c(k+1) + k d). k = 0 is a plain decoding step.

c(n) is learned online from the engine's own timed passes, because its shape depends
on the backend: on a CPU a 16-token pass can cost 1.2x or 8x a 1-token pass depending
on the matmul kernel.
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
    """Seconds for a target pass over n tokens, learned online per n.

    On a CPU the curve is not a line: a 2-token pass may cost the same as a 1-token pass
    (both read the weights once) while 4 tokens can cost twice as much, because the BLAS
    kernel changes with the row count. So we keep an exponentially weighted mean per n.
    An n never measured is priced by an optimistic prior, c(1) * (1 + slope * (n - 1)),
    so the policy tries it, measures it, and learns what it really costs here.
    """

    def __init__(self, slope: float = 0.05, decay: float = 0.9) -> None:
        self.slope, self.decay = slope, decay
        self.means: dict[int, float] = {}

    def record(self, n_tokens: int, seconds: float) -> None:
        mean = self.means.get(n_tokens)
        self.means[n_tokens] = seconds if mean is None else self.decay * mean + (1 - self.decay) * seconds

    def __call__(self, n_tokens: int) -> float:
        if n_tokens in self.means:
            return self.means[n_tokens]
        base = self._base()
        prior = base * (1 + self.slope * (n_tokens - 1))
        # never cheaper than a measured smaller pass
        smaller = [c for n, c in self.means.items() if n < n_tokens]
        return max([prior, *smaller])

    def _base(self) -> float:
        """c(1), measured or extrapolated from the smallest measured pass."""
        if 1 in self.means:
            return self.means[1]
        if not self.means:
            return 1.0
        n, cost = min(self.means.items())
        return cost / (1 + self.slope * (n - 1))


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
