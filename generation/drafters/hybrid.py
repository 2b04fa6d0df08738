"""The product's default drafter: copy from the chunks when a match exists, else draft
with the small model, choosing source and length by expected tokens per second.

Why this policy: on a CPU the n-gram copy is free to produce, so even a modest acceptance
pays for itself, while a model draft costs a draft step per token. Acceptance of a copy
depends strongly on how long the matched suffix is (a 1-token match is a guess, a 6-token
match inside a quoted sentence rarely fails), so we keep one acceptance estimate per
match length and one for the model, update them from every verification, and for each
step pick the option (copy, model, or no draft) and the length k with the best
E(k) / (c(k+1) + k d) under the learned pass cost c (see policy.py).

The draft model joins an answer only once its prefill has paid for itself. Its prefill P is
paid up front; each token it then helps emit saves s seconds on average (a plain step minus
the expected seconds per token of a model draft, from what the engine has learned about the
draft model across answers). An answer's length is unknown, so the tokens emitted so far
stand in for those still to come, and the model joins when n * s >= P. Answers on Spec-Bench
RAG are ~28 tokens: with a prefill of the whole prompt (1.3-1.8 s) first thing, hybrid ran at
0.43x plain on a 2-core CPU.
"""

from __future__ import annotations

from generation.drafters.base import Draft
from generation.drafters.model import ModelDrafter
from generation.drafters.ngram import NgramDrafter, draft_from_match
from generation.drafters.policy import PRIOR_TRIALS, Acceptance, DraftModelRecord, PassCost, best_draft_length

# prior per-token acceptance of a copy by matched suffix length (1, 2, ..., 6+): weak, quickly overridden
COPY_PRIOR = (0.15, 0.3, 0.45, 0.55, 0.65, 0.75)
MODEL_MAX_DRAFT = 16  # the model's own stopping rule (policy.worth_drafting_on) usually ends drafts sooner
DRAFT_STEP_PRIOR = 0.3  # a draft step, as a share of a target step, until one is measured
PREFILL_TOKEN_PRIOR = 0.05  # a draft prefill token, as a share of a target step (measured: 2 ms against 46)
EXPLORE_SAVING = 0.05  # the saving assumed at worst, so a long answer still tries the model and learns


class HybridDrafter:
    name = "hybrid"

    def __init__(
        self,
        ngram: NgramDrafter | None,
        model: ModelDrafter | None,
        cost: PassCost,
        fixed_length: int | None = None,
        record: DraftModelRecord | None = None,
    ) -> None:
        if ngram is None and model is None:
            raise ValueError("a hybrid drafter needs an n-gram drafter, a model drafter, or both")
        self.ngram, self.model, self.cost = ngram, model, cost
        self.fixed_length = fixed_length
        self.copy_acceptance = [Acceptance(a * PRIOR_TRIALS, PRIOR_TRIALS) for a in COPY_PRIOR]
        self.record = record or DraftModelRecord()  # the engine's, shared across answers
        # this answer starts from what earlier answers learned, held lightly: a low estimate that stopped
        # all model drafts would otherwise never be revised
        self.model_acceptance = self.record.acceptance.softened(2 * PRIOR_TRIALS)
        self._last: tuple[Acceptance, int] | None = None
        self._model_prompt: list[int] | None = None  # prefilled into the draft model once it joins
        self._model_prefill_tokens: int | None = None  # what that prefill would compute; fixed until it runs
        self._proposed = False

    def prefill(self, context_ids: list[int]) -> None:
        """Index the prompt for copies now; prefill the draft model only after the first target pass.

        The first token then waits for the target's prefill alone (the draft's prefill of a
        1000-token prompt is seconds on a CPU); the first step drafts by copy or not at all."""
        if self.ngram is not None:
            self.ngram.prefill(context_ids)
        self._model_prompt = list(context_ids) if self.model is not None else None

    def propose(self, context_ids: list[int], k: int) -> Draft:
        self._last = None
        if k <= 0:
            return Draft()
        match = self.ngram.lookup(context_ids, k) if self.ngram is not None else None
        model = self._ready_model(context_ids)
        if self.fixed_length is not None:
            return self._propose_fixed(context_ids, min(k, self.fixed_length), match, model)
        choice = (0, 1.0 / self.cost(1), None)  # (length, expected tokens/s, source)
        if match is not None:
            stats = self._copy_stats(match.length)
            n, rate = best_draft_length(stats.rate, self.cost, 0.0, len(match.continuation))
            if rate > choice[1]:
                choice = (n, rate, stats)
        if model is not None:
            n, rate = best_draft_length(self.model_acceptance.rate, self.cost, self._draft_step(), k)
            if rate > choice[1]:
                choice = (n, rate, self.model_acceptance)
        n, _, stats = choice
        if stats is None:
            return Draft()
        if stats is self.model_acceptance:
            # the average acceptance says drafting pays; the draft's own confidence says how far
            draft = model.propose(context_ids, min(k, MODEL_MAX_DRAFT), self.cost)
        else:
            draft = draft_from_match(match).truncate(n)
        self._last = (stats, len(draft))
        return draft

    @property
    def draft_prefill(self) -> tuple[float, int]:
        """Seconds and prompt tokens the draft model spent on its prefill for this answer (0 until it ran)."""
        return (self.model.prefill_seconds, self.model.prefilled_tokens) if self.model is not None else (0.0, 0)

    def _ready_model(self, context_ids: list[int]) -> ModelDrafter | None:
        """The model drafter once it has joined (prefilled then), None before; never on the first proposal.

        Alone or at a fixed draft length it joins at the second proposal; in the adaptive hybrid,
        once its prefill has paid for itself (module docstring)."""
        if self._model_prompt is None:
            return self.model
        if not self._proposed:
            self._proposed = True
            return None
        if self.ngram is not None and self.fixed_length is None and not self._prefill_pays(context_ids):
            return None
        self.model.prefill(self._model_prompt)
        if self.model.prefilled_tokens >= 16:
            self.record.prefill_token_seconds = self.model.prefill_seconds / self.model.prefilled_tokens
        self._model_prompt = None
        return self.model

    def _prefill_pays(self, context_ids: list[int]) -> bool:
        """n * s >= P: the tokens emitted so far times the expected saving per token cover the prefill."""
        plain = self.cost(1)
        _, rate = best_draft_length(self.model_acceptance.rate, self.cost, self._draft_step(), MODEL_MAX_DRAFT)
        saving = max(plain - 1.0 / rate, EXPLORE_SAVING * plain)
        per_token = self.record.prefill_token_seconds or PREFILL_TOKEN_PRIOR * plain
        if self._model_prefill_tokens is None:  # asked once: it walks the whole prompt against the draft's cache
            self._model_prefill_tokens = self.model.prefill_tokens_needed(self._model_prompt)
        emitted = len(context_ids) - len(self._model_prompt)
        return emitted * saving >= self._model_prefill_tokens * per_token

    def _draft_step(self) -> float:
        """Seconds per draft-model token: this answer's, else the engine's record, else a prior."""
        return self.model.step_seconds or self.record.step_seconds or DRAFT_STEP_PRIOR * self.cost(1)

    def _propose_fixed(self, context_ids: list[int], k: int, match, model: ModelDrafter | None) -> Draft:
        """Fixed-length mode: copy when a match exists, else draft with the model."""
        if match is not None:
            draft = draft_from_match(match).truncate(k)
            self._last = (self._copy_stats(match.length), len(draft))
        elif model is not None:
            draft = model.propose(context_ids, k)
            self._last = (self.model_acceptance, len(draft))
        else:
            draft = Draft()
        return draft

    def observe(self, num_accepted: int) -> None:
        if self._last is not None and self._last[0] is self.model_acceptance:
            self.model.observe(num_accepted)
            self.record.step_seconds = self.model.step_seconds
            self.record.acceptance.update(self._last[1], num_accepted)
        if self._last is not None:
            stats, drafted = self._last
            stats.update(drafted, num_accepted)

    def _copy_stats(self, match_length: int) -> Acceptance:
        return self.copy_acceptance[min(match_length, len(self.copy_acceptance)) - 1]
