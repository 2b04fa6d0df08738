"""Per-answer statistics, updated as the engine runs and streamed with every event."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Stats:
    prompt_tokens: int = 0
    prefilled_tokens: int = 0  # prompt tokens actually computed (the rest came from the prefix snapshot)
    new_tokens: int = 0
    target_passes: int = 0  # decode passes of the target (prefill not counted)
    drafted: dict[str, int] = field(default_factory=lambda: {"ngram": 0, "model": 0})
    accepted: dict[str, int] = field(default_factory=lambda: {"ngram": 0, "model": 0})
    prefill_s: float = 0.0
    ttft_s: float = 0.0
    decode_s: float = 0.0  # from the end of prefill to the last emitted token
    draft_prefill_s: float = 0.0  # the draft model's prefill, inside decode_s (it runs after the first token)
    draft_prefilled_tokens: int = 0  # prompt tokens the draft model computed (see ModelDrafter.context_tokens)

    @property
    def acceptance_rate(self) -> float:
        drafted = sum(self.drafted.values())
        return sum(self.accepted.values()) / drafted if drafted else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Emitted tokens per target decode pass, bonus/correction included (1.0 for plain)."""
        return self.new_tokens / self.target_passes if self.target_passes else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.new_tokens / self.decode_s if self.decode_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "prefilled_tokens": self.prefilled_tokens,
            "new_tokens": self.new_tokens,
            "target_passes": self.target_passes,
            "drafted": dict(self.drafted),
            "accepted": dict(self.accepted),
            "acceptance_rate": round(self.acceptance_rate, 4),
            "tokens_per_pass": round(self.tokens_per_pass, 4),
            "prefill_s": round(self.prefill_s, 4),
            "ttft_s": round(self.ttft_s, 4),
            "decode_s": round(self.decode_s, 4),
            "draft_prefill_s": round(self.draft_prefill_s, 4),
            "draft_prefilled_tokens": self.draft_prefilled_tokens,
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 4),
        }
