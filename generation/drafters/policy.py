"""Choosing the draft length from measured costs and observed acceptance.

A draft of k tokens whose tokens are each accepted with probability a (given the ones
before were) yields E(k) = (1 - a^(k+1)) / (1 - a) tokens per target pass, bonus or
correction included. It costs one target pass over k+1 tokens, c(k+1), plus k draft
steps of d seconds each (d = 0 for copies). We pick the k in 0..k_max that maximises
E(k) / (c(k+1) + k d). k = 0 is a plain decoding step.

The shape of c is measured on the machine, because it depends on the backend: on a CPU
a 16-token pass can cost 1.2x or 8x a 1-token pass depending on the matmul kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Acceptance:
    """Per-token acceptance estimate with a Beta-like prior, exponentially forgotten."""

    accepted: float
    trials: float
    decay: float = 0.98

    @property
    def rate(self) -> float:
        return min(self.accepted / self.trials, 0.999)

    def softened(self, max_trials: float) -> Acceptance:
        """A copy holding the same rate on at most `max_trials` trials, so new evidence moves it quickly."""
        trials = min(self.trials, max_trials)
        return Acceptance(self.rate * trials, trials, self.decay)

    def update(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        # a draft is a run of Bernoulli trials that stops at the first miss
        trials = accepted + (1 if accepted < drafted else 0)
        self.accepted = self.decay * self.accepted + accepted
        self.trials = self.decay * self.trials + trials


MODEL_PRIOR = 0.6  # per-token acceptance of a draft-model token before any is observed
PRIOR_TRIALS = 4.0  # weight of a prior acceptance, in drafted tokens: weak, quickly overridden


@dataclass
class DraftModelRecord:
    """What the engine has learned about its draft model on this machine, kept across answers."""

    acceptance: Acceptance = field(default_factory=lambda: Acceptance(MODEL_PRIOR * PRIOR_TRIALS, PRIOR_TRIALS))
    step_seconds: float = 0.0  # seconds per drafted token (0: not measured yet)
    prefill_token_seconds: float = 0.0  # seconds per prompt token of the draft's prefill (0: not measured yet)


class PassCost:
    """Seconds for a target pass over n tokens: a measured shape times an online level.

    On a CPU the curve is far from a line: a 2-token pass may cost what a 1-token pass
    does while 4 tokens cost twice as much, because the BLAS kernel changes with the row
    count. The shape r(n) = c(n) / c(1) comes from a calibration sweep on this machine
    (see calibration.py); the level c(1) follows the passes the engine actually times, so
    a busy machine moves the whole curve, never just the one point it happened to hit.
    """

    def __init__(self, relative: dict[int, float] | None = None, decay: float = 0.9) -> None:
        self.relative = dict(sorted((relative or {1: 1.0}).items()))
        self.decay = decay
        self.level: float | None = None  # seconds of a 1-token pass

    def record(self, n_tokens: int, seconds: float) -> None:
        estimate = seconds / self.shape(n_tokens)
        self.level = estimate if self.level is None else self.decay * self.level + (1 - self.decay) * estimate

    def __call__(self, n_tokens: int) -> float:
        return (self.level or 1.0) * self.shape(n_tokens)

    def shape(self, n_tokens: int) -> float:
        """r(n), linearly interpolated between calibrated sizes and extrapolated past the last two."""
        sizes = list(self.relative)
        if n_tokens in self.relative:
            return self.relative[n_tokens]
        if len(sizes) == 1:
            return self.relative[sizes[0]] * n_tokens / sizes[0]
        lo = max([n for n in sizes if n < n_tokens], default=sizes[0])
        hi = min([n for n in sizes if n > n_tokens], default=sizes[-1])
        if lo == hi:  # beyond the calibrated range: continue the last segment
            lo, hi = sizes[-2], sizes[-1]
        slope = (self.relative[hi] - self.relative[lo]) / (hi - lo)
        return max(self.relative[lo] + slope * (n_tokens - lo), 1e-6)


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


class ConfidenceCalibration:
    """P(a draft-model token is accepted | the draft's own top probability), learned online.

    The draft's confidence ranks tokens well but is not calibrated against the target, so
    we keep an acceptance estimate per confidence bin, seeded with the bin's midpoint.
    """

    def __init__(self, bins: int = 10, prior_trials: float = 2.0) -> None:
        self.bins = [Acceptance((i + 0.5) / bins * prior_trials, prior_trials) for i in range(bins)]

    def __call__(self, confidence: float) -> float:
        return self.bins[min(int(confidence * len(self.bins)), len(self.bins) - 1)].rate

    def update(self, confidences: list[float], accepted: int) -> None:
        """Tokens up to the first miss were tried: the accepted ones hit, the next one missed."""
        for i, confidence in enumerate(confidences[: accepted + 1]):
            self.bins[min(int(confidence * len(self.bins)), len(self.bins) - 1)].update(1, int(i < accepted))


def best_prefix(prefix_probs: list[float], cost: PassCost, sunk_seconds: float) -> int:
    """How many drafted tokens to send: prefix_probs[i] = P(the first i+1 are all accepted)."""
    return _best_send(prefix_probs, cost, sunk_seconds)[0]


def _best_send(prefix_probs: list[float], cost: PassCost, sunk_seconds: float) -> tuple[int, float]:
    best_k, best_rate, expected = 0, 1.0 / (cost(1) + sunk_seconds), 1.0
    for k, p in enumerate(prefix_probs, start=1):
        expected += p
        rate = expected / (cost(k + 1) + sunk_seconds)
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k, best_rate


def worth_drafting_on(prefix_probs: list[float], survival: float, cost: PassCost, step: float, room: int) -> bool:
    """Should the draft model propose another token, or should we verify what we have?

    Sending now yields the best prefix's rate. Drafting j more tokens costs j draft steps and a
    wider pass, and adds P_k * s^t for t = 1..j, where P_k is the chance the current draft
    survives and s the chance each next token does. We go on if some j in 1..room beats sending
    now. The look-ahead matters on CPUs whose pass cost is a staircase (here 1 to 3 tokens cost
    the same, 4 cost 1.5x, 16 cost 2.1x): one step at a time, the stair at 4 would stop every
    draft at 3 tokens even when a confident run of 12 would pay for it.
    """
    k = len(prefix_probs)
    _, send_now = _best_send(prefix_probs, cost, k * step)
    expected, survive = 1.0 + sum(prefix_probs), prefix_probs[-1] if prefix_probs else 1.0
    for j in range(1, room + 1):
        survive *= survival
        expected += survive
        if expected / (cost(k + j + 1) + (k + j) * step) > send_now:
            return True
    return False
