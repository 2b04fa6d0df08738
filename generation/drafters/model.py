"""Draft-model drafter: a small LM of the same family proposes tokens one at a time.

It keeps its own KV cache. Before drafting it syncs the cache with the context: crop to
the longest common prefix, then feed what is missing in one pass (after a fully accepted
draft that is the last draft token plus the bonus token; after n-gram steps, the copied
tokens). Each token is drawn from q = logits_to_probs(draft logits), the same warping the
target gets, and drafting stops early once the model's own top probability falls below
`min_confidence`, or, when the caller passes the target's pass cost, once drafting further no
longer pays by the calibrated odds (policy.worth_drafting_on).

With `context_tokens` set, the draft model reads a shorter view of the prompt: what its cache
already holds from the last answer (the fixed system prefix and demonstration) plus the
prompt's last `context_tokens` tokens (the question and the end of the passages). Its prefill
then costs a fixed ~context_tokens positions instead of the whole prompt: on a 2-core CPU the
whole 700-1300-token prompt took the int4 draft 1.3-2.5 s, more than it saved on most answers.
The draft only proposes; what it sees changes acceptance, never the output.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from generation import arrays
from generation.arrays import Generator, Logits
from generation.drafters.base import MODEL, Draft
from generation.drafters.policy import ConfidenceCalibration, PassCost, best_prefix, worth_drafting_on
from generation.sampling import SamplingParams, logits_to_probs, sample
from generation.token_ids import common_prefix_length

if TYPE_CHECKING:
    from generation.cached_lm import CachedLM
    from generation.llamacpp_lm import LlamaCppLM


class ModelDrafter:
    name = "model"

    def __init__(
        self,
        lm: CachedLM | LlamaCppLM,
        params: SamplingParams,
        generator: Generator,
        min_confidence: float = 0.3,
        context_tokens: int | None = None,
    ) -> None:
        self.lm, self.params, self.generator = lm, params, generator
        self.min_confidence = min_confidence
        self.context_tokens = context_tokens
        self.fed: list[int] = []  # the tokens whose keys/values are in lm's cache (in view coordinates)
        self._view: list[int] = []  # what the draft reads in place of the prompt's first _prompt_length tokens
        self._prompt_length = 0
        self.prefill_seconds, self.prefilled_tokens = 0.0, 0
        self._seconds, self._steps = 0.0, 0  # measured drafting cost, for the length policy
        self.calibration = ConfidenceCalibration()
        self._confidences: list[float] = []  # of the last draft, for observe()

    def prefill(self, context_ids: list[int]) -> None:
        prompt = list(context_ids[:-1])  # the last prompt token is fed with the first draft
        self._view, self._prompt_length = self._prompt_view(prompt), len(prompt)
        start = time.perf_counter()
        self.lm.prefill(self._view)
        self.prefill_seconds = time.perf_counter() - start
        self.prefilled_tokens = len(self._view) - self.lm.reused
        self.fed = list(self._view)

    def prefill_tokens_needed(self, context_ids: list[int]) -> int:
        """How many prompt tokens `prefill(context_ids)` would compute (the rest comes from the cache)."""
        view = self._prompt_view(list(context_ids[:-1]))
        return len(view) - self.lm.snapshot_prefix(view)

    def _prompt_view(self, prompt: list[int]) -> list[int]:
        """The whole prompt, or the cached prefix plus the last `context_tokens` tokens.

        With nothing cached (a process's first answer) the whole prompt is read once: that
        builds the fixed prefix later answers reuse."""
        reused = self.lm.snapshot_prefix(prompt)
        if self.context_tokens is None or reused == 0 or len(prompt) - reused <= self.context_tokens:
            return prompt
        return prompt[:reused] + prompt[len(prompt) - self.context_tokens :]

    def propose(self, context_ids: list[int], k: int, cost: PassCost | None = None) -> Draft:
        """Up to k tokens. With a pass cost, draft while another token is expected to raise the
        tokens per second (calibrated odds, measured step time), then send the most profitable prefix."""
        self._confidences = []
        if k <= 0:
            return Draft()
        start = time.perf_counter()
        logits = self._logits_after(context_ids)
        draft, prefix_probs = Draft(), []
        for i in range(k):
            q = logits_to_probs(logits, self.params)
            token = int(q.argmax()) if self.params.greedy else sample(q, self.generator)
            draft.tokens.append(token)
            draft.probs.append(None if self.params.greedy else q)  # greedy q is a point mass
            draft.origins.append(MODEL)
            confidence = float(arrays.softmax(arrays.float32(logits)).max()) if self.params.greedy else float(q[token])
            self._confidences.append(confidence)
            survival = self.calibration(confidence)
            prefix_probs.append((prefix_probs[-1] if prefix_probs else 1.0) * survival)
            if i == k - 1:
                break
            if cost is None:
                if confidence < self.min_confidence:
                    break
            elif not worth_drafting_on(prefix_probs, survival, cost, self._step_estimate(start, i + 1), k - i - 1):
                break
            logits = self.lm.extend([token])[-1]
            self.fed.append(token)
        seconds = time.perf_counter() - start
        self._record_time(seconds, len(draft))
        if cost is not None:
            draft = draft.truncate(best_prefix(prefix_probs, cost, seconds))
            self._confidences = self._confidences[: len(draft)]
        return draft

    def observe(self, num_accepted: int) -> None:
        self.calibration.update(self._confidences, num_accepted)

    def _logits_after(self, context_ids: list[int]) -> Logits:
        """Sync the cache to context[:-1] + feed the rest; return logits for the next token."""
        context_ids = self._view + list(context_ids[self._prompt_length :])
        common = min(common_prefix_length(self.fed, context_ids), len(context_ids) - 1)
        self.lm.crop(common)
        self.fed = list(context_ids)
        return self.lm.extend(context_ids[common:], last_only=True)[-1]

    def _step_estimate(self, start: float, drafted: int) -> float:
        """Seconds per draft token: the running mean, or this draft's pace before the first record."""
        return self.step_seconds or (time.perf_counter() - start) / drafted

    @property
    def step_seconds(self) -> float:
        """Mean seconds per drafted token so far (0 before the first draft)."""
        return self._seconds / self._steps if self._steps else 0.0

    def _record_time(self, seconds: float, steps: int) -> None:
        self._seconds += seconds
        self._steps += steps
