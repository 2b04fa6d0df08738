"""The speculative answer engine: prefill once, then draft -> verify -> emit until done.

The engine works on token ids and knows nothing about retrieval or prompts. One loop
serves every mode: with no drafter each step verifies an empty draft, which is plain
target decoding (the `--no-speculation` reference). Each step feeds the target the last
emitted token plus the k draft tokens in one pass, keeps the accepted prefix and one
target token, and crops the KV cache back to what was kept.

`generate` yields an Event per step: the new text (incrementally detokenized, stop
strings held back), the new token ids, where each came from, and running stats.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.paths import cache_root
from generation import arrays
from generation.arrays import Generator
from generation.calibration import cached_relative_costs, measure_pass_seconds
from generation.detokenizer import IncrementalDetokenizer
from generation.drafters import Draft, HybridDrafter, ModelDrafter, NgramDrafter, Origin
from generation.drafters.base import TARGET
from generation.drafters.policy import DraftModelRecord, PassCost
from generation.errors import SpecragError
from generation.llamacpp_lm import LlamaCppLM
from generation.prefix_store import PrefixStore
from generation.repetition import RepetitionGuard, numeral_classes
from generation.sampling import SamplingParams, logits_to_probs
from generation.stats import Stats
from generation.stopping import StopStrings
from generation.token_filter import TokenFilter, filter_rows
from generation.verifier import verify

if TYPE_CHECKING:  # transformers' modeling_utils: 128 MB and 3 s to import, which the llama.cpp path never needs
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from generation.cached_lm import CachedLM

SPECULATION_MODES = ("none", "ngram", "model", "hybrid")


@dataclass(frozen=True)
class GenerationConfig:
    max_new_tokens: int = 256
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop_strings: tuple[str, ...] = ()
    seed: int = 0
    speculation: str = "hybrid"  # one of SPECULATION_MODES
    max_draft: int = 16  # upper bound for the adaptive draft length
    draft_length: int | None = None  # fixed draft length instead of the adaptive policy
    min_draft_confidence: float = 0.3  # the draft model stops below this top probability
    draft_context: int | None = None  # the draft model reads its cached prefix + this many last prompt tokens
    repeat_span: int = 0  # stop ("repeat") when a run of this many answer tokens comes round again; 0: off
    repeat_limit: int = 3  # ... for the repeat_limit-th time

    def __post_init__(self) -> None:
        if self.speculation not in SPECULATION_MODES:
            raise SpecragError(
                f"unknown speculation mode {self.speculation!r}; use one of {', '.join(SPECULATION_MODES)}"
            )
        if self.max_new_tokens < 1:
            raise SpecragError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.repeat_span > 0 and self.repeat_limit < 2:
            raise SpecragError(f"repeat_limit must be at least 2, got {self.repeat_limit}")
        if self.draft_context is not None and self.draft_context < 1:
            raise SpecragError(f"draft_context must be at least 1 token, got {self.draft_context}")


@dataclass
class Event:
    text: str
    token_ids: list[int]
    origins: list[Origin]
    stats: Stats
    finish_reason: str | None = None  # "eos" | "length" | "stop" | "repeat" on the last event


@dataclass
class PrefillSnapshot:
    target_cache: object  # the target's KV cache over prompt[:-1]
    draft_cache: object | None  # the draft's, when there is a draft model
    target_seconds: float
    draft_seconds: float = 0.0


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    origins: list[Origin]
    stats: Stats
    finish_reason: str


class Engine:
    def __init__(
        self,
        target: PreTrainedModel | LlamaCppLM,
        tokenizer: PreTrainedTokenizerBase,
        draft: PreTrainedModel | LlamaCppLM | None = None,
        eos_token_ids: Sequence[int] | None = None,
    ) -> None:
        self.target = as_cached(target)
        self.draft = as_cached(draft) if draft is not None else None
        self.tokenizer = tokenizer
        self.eos = set(eos_token_ids if eos_token_ids is not None else default_eos_ids(target, tokenizer))
        self.cost: PassCost | None = None  # calibrated on first use, then kept across answers
        self.draft_record = DraftModelRecord()  # the draft model's acceptance and costs, across answers
        self._numerals: dict[int, int] | None = None

    @property
    def numerals(self) -> dict[int, int]:
        """The repetition guard's token classes: every numeral token as one (read from the vocabulary once)."""
        if self._numerals is None:
            self._numerals = numeral_classes(self.tokenizer)
        return self._numerals

    @property
    def verifies_drafts(self) -> bool:
        """Can a pass verify a draft? Not on a target whose rows depend on the pass width (llamacpp-f16)."""
        return self.target.max_pass_rows > 1

    @property
    def context_limit(self) -> int:
        """How many positions (prompt + answer) the target model can attend to."""
        config = self.target.model.config
        return int(getattr(config, "max_position_embeddings", None) or 4096)

    def warm(self, prefix_ids: Sequence[int], store: PrefixStore | None = None) -> float:
        """Prefill a prefix that later prompts start with (target and draft) and keep it as their
        snapshots, so the next prefill reuses it. With a `store`, a runner that can load its KV cache
        (llama.cpp) takes a saved one instead, or saves the one it computed. Returns the seconds it took."""
        start = time.perf_counter()
        for lm in (self.target, self.draft):
            if lm is not None and not (store is not None and store.load(lm, prefix_ids)):
                lm.prefill(list(prefix_ids))
                if store is not None:
                    store.save(lm, prefix_ids)
        return time.perf_counter() - start

    def prefill_snapshot(self, prompt_ids: Sequence[int], with_draft: bool = True) -> PrefillSnapshot:
        """Prefill target (and draft, if asked and present) on prompt[:-1] and return copies of their caches.

        For comparisons that decode one prompt with other generators (the bench runs
        transformers' own methods from it); the engine's own snapshot stays in place.
        """
        ids = list(prompt_ids)[:-1]
        start = time.perf_counter()
        self.target.prefill(ids)
        target_seconds = time.perf_counter() - start
        draft_cache = None
        if with_draft and self.draft is not None:
            self.draft.prefill(ids)
            draft_cache = copy.deepcopy(self.draft.cache)
        draft_seconds = time.perf_counter() - start - target_seconds
        return PrefillSnapshot(copy.deepcopy(self.target.cache), draft_cache, target_seconds, draft_seconds)

    def next_token_logprobs(self, prompt_ids: Sequence[int], candidates: Sequence[int]) -> list[float]:
        """The target's log-probabilities of `candidates` as the token after `prompt_ids` (e.g. Yes and No).

        The prompt becomes the target's snapshot, so a later prompt that shares its start (the answer
        after a judgement) prefills only what differs."""
        ids = list(prompt_ids)
        if not ids:
            raise SpecragError("the prompt is empty: nothing to score")
        logits = self.target.prefill(ids)
        if logits is None:  # the whole prompt came from the cache: feed its last token again
            self.target.crop(len(ids) - 1)
            logits = self.target.extend(ids[-1:], last_only=True)
        logprobs = arrays.log_softmax(arrays.float32(logits[-1]))
        return [float(logprobs[token]) for token in candidates]

    def pass_seconds(self, sizes: Sequence[int], context: int, repeats: int = 3) -> tuple[dict[int, float], float]:
        """Seconds of a target pass over n tokens after `context` random tokens, and of that context's prefill."""
        ids = arrays.random_tokens(self.target, self.target.vocab_size, context, seed=0)
        start = time.perf_counter()
        self.target.prefill(ids)
        prefill = time.perf_counter() - start
        return measure_pass_seconds(self.target, tuple(sizes), repeats, context), prefill

    def logit_margin(self, prefix_cache: object, token_ids: Sequence[int]) -> float:
        """Target top-1 minus top-2 logit after a cached prefix plus `token_ids` (a tiny margin means rounding).

        Runs on a copy of `prefix_cache`, so neither it nor the engine's own cache changes (llama.cpp has one
        cache: it is cropped back to `prefix_cache` first)."""
        if isinstance(self.target, LlamaCppLM):
            self.target.restore(prefix_cache)
            lm = self.target
        else:
            from generation.cached_lm import CachedLM

            lm = CachedLM(self.target.model, keep_snapshot=False)
            lm.cache = copy.deepcopy(prefix_cache)
        return round(arrays.top_two_gap(lm.extend(list(token_ids), last_only=True)[-1]), 6)

    def generate(
        self,
        prompt_ids: Sequence[int],
        chunks: Sequence[Sequence[int]] = (),
        config: GenerationConfig | None = None,
        token_filter: TokenFilter | None = None,
    ) -> Iterator[Event]:
        """Decode an answer to `prompt_ids`, copying drafts from `chunks`; `token_filter` restricts
        every target row (plain and speculative alike, token_filter.py)."""
        config = config or GenerationConfig()
        if not prompt_ids:
            raise SpecragError("the prompt is empty: nothing to continue")
        generator = arrays.new_generator(self.target, config.seed)
        stats = Stats(prompt_tokens=len(prompt_ids))
        start = time.perf_counter()
        drafter = self._make_drafter(config, chunks, generator)
        self._prefill(list(prompt_ids), drafter)
        stats.prefill_s = time.perf_counter() - start
        stats.prefilled_tokens = len(prompt_ids) - 1 - self.target.reused
        yield from _Decoding(self, config, drafter, generator, stats, list(prompt_ids), start, token_filter).run()

    def complete(
        self,
        prompt_ids: Sequence[int],
        chunks: Sequence[Sequence[int]] = (),
        config: GenerationConfig | None = None,
        on_text: Callable[[str], None] | None = None,
        token_filter: TokenFilter | None = None,
    ) -> Completion:
        """Run `generate` to the end and collect the answer, passing each text delta to `on_text`."""
        text, ids, origins = [], [], []
        event = None
        for event in self.generate(prompt_ids, chunks, config, token_filter):
            if on_text is not None and event.text:
                on_text(event.text)
            text.append(event.text)
            ids += event.token_ids
            origins += event.origins
        return Completion("".join(text), ids, origins, event.stats, event.finish_reason or "length")

    def _prefill(self, prompt_ids: list[int], drafter: HybridDrafter | None) -> None:
        self.target.prefill(prompt_ids[:-1])  # the last prompt token is fed with the first draft
        if drafter is not None:
            drafter.prefill(prompt_ids)

    def _make_drafter(
        self, config: GenerationConfig, chunks: Sequence[Sequence[int]], generator: Generator
    ) -> HybridDrafter | None:
        if config.speculation == "none" or not self.verifies_drafts:
            return None
        self.cost = self.cost or PassCost(
            cached_relative_costs(self.target, cache_root() / "calibration.json", calibration_extra(self.target.model))
        )
        ngram = NgramDrafter(chunks) if config.speculation in ("ngram", "hybrid") else None
        model = None
        if config.speculation in ("model", "hybrid"):
            if self.draft is None:
                raise SpecragError(
                    f"speculation mode {config.speculation!r} needs a draft model; "
                    "configure one or use --speculation ngram"
                )
            model = ModelDrafter(
                self.draft, config.sampling, generator, config.min_draft_confidence, config.draft_context
            )
        return HybridDrafter(ngram, model, self.cost, fixed_length=config.draft_length, record=self.draft_record)


class _Decoding:
    """The state of one answer being decoded (kept out of Engine so Engine stays reusable)."""

    def __init__(
        self,
        engine: Engine,
        config: GenerationConfig,
        drafter: HybridDrafter | None,
        generator: Generator,
        stats: Stats,
        context: list[int],
        start: float,
        token_filter: TokenFilter | None = None,
    ) -> None:
        self.engine, self.config, self.drafter, self.generator = engine, config, drafter, generator
        self.stats, self.context, self.start = stats, context, start
        self.token_filter, self.prompt_length = token_filter, len(context)
        self.detokenizer = IncrementalDetokenizer(engine.tokenizer)
        self.stops = StopStrings(config.stop_strings)
        classes = engine.numerals if config.repeat_span > 0 else None
        self.repeats = RepetitionGuard(config.repeat_span, config.repeat_limit, classes)
        self.emitted = 0

    def run(self) -> Iterator[Event]:
        decode_start = time.perf_counter()
        while True:
            tokens, origins = self._step()
            text, ids, kept_origins, finish = self._emit(tokens, origins)
            now = time.perf_counter()
            if self.stats.new_tokens == 0 and ids:
                self.stats.ttft_s = now - self.start
            self.stats.new_tokens += len(ids)
            self.stats.decode_s = now - decode_start
            if finish in ("eos", "length", "repeat"):
                tail, stopped = self.stops.push(self.detokenizer.flush())
                text += tail + ("" if stopped else self.stops.flush())
            yield Event(text, ids, kept_origins, self.stats, finish)
            if finish is not None:
                return

    def _step(self) -> tuple[list[int], list[Origin]]:
        """One target pass: verify a draft, return the accepted tokens and their origins."""
        budget = self.config.max_new_tokens - self.emitted
        draft = Draft()
        if self.drafter is not None and budget > 1:
            # the widest pass whose rows come out as one-token passes would (17 rows on torch, 7 on llama.cpp)
            widest = self.engine.target.max_pass_rows
            draft = self.drafter.propose(self.context, min(self.config.max_draft, budget - 1, widest - 1))
        target = self.engine.target
        base = target.length
        started = time.perf_counter()
        logits = target.extend([self.context[-1], *draft.tokens])
        greedy = self.config.sampling.greedy
        if self.token_filter is not None:
            answer = self.context[self.prompt_length :]
            logits = filter_rows(self.token_filter, answer, draft.tokens, logits, greedy)
        # greedy verification only takes each row's argmax: the logits' is the one-hot rows' (no 150k-wide copy)
        probs = logits if greedy else logits_to_probs(logits, self.config.sampling)
        tokens = verify(probs, draft.tokens, draft.probs, self.generator, greedy)
        if self.engine.cost is not None:
            self.engine.cost.record(len(draft) + 1, time.perf_counter() - started)
        accepted = len(tokens) - 1
        target.crop(base + 1 + accepted)  # keep the fed token and the accepted draft
        self.stats.target_passes += 1
        if self.drafter is not None:
            self.drafter.observe(accepted)
            self.stats.draft_prefill_s, self.stats.draft_prefilled_tokens = self.drafter.draft_prefill
        for i, origin in enumerate(draft.origins):
            self.stats.drafted[origin.drafter] += 1
            self.stats.accepted[origin.drafter] += i < accepted
        return tokens, [*draft.origins[:accepted], TARGET]

    def _emit(self, tokens: list[int], origins: list[Origin]) -> tuple[str, list[int], list[Origin], str | None]:
        """Append tokens one at a time, stopping at EOS, a stop string, a loop or the token budget."""
        text, kept, finish = [], 0, None
        for token in tokens:
            self.context.append(token)
            self.emitted += 1
            kept += 1
            if token in self.engine.eos:
                finish = "eos"
                break
            safe, stopped = self.stops.push(self.detokenizer.push([token]))
            text.append(safe)
            if stopped:
                finish = "stop"
                break
            if self.repeats.push(token):
                finish = "repeat"
                break
            if self.emitted >= self.config.max_new_tokens:
                finish = "length"
                break
        return "".join(text), tokens[:kept], origins[:kept], finish


def as_cached(model: PreTrainedModel | LlamaCppLM) -> CachedLM | LlamaCppLM:
    """The model with its KV cache: llama.cpp keeps its own, a transformers model gets a CachedLM."""
    if isinstance(model, LlamaCppLM):
        return model
    from generation.cached_lm import CachedLM

    return CachedLM(model)


def calibration_extra(model: PreTrainedModel | LlamaCppLM) -> str:
    """What besides model, dtype and threads changes the pass cost: kernel layout, numeric path, lean passes."""
    if isinstance(model, LlamaCppLM):
        return "llamacpp"
    from generation.lean_decode import supports
    from generation.linear_layout import kernel_layout
    from generation.quantized_model import numeric_path

    path = numeric_path(model)
    return kernel_layout(model) + ("" if path == "none" else f"|{path}") + ("|lean" if supports(model) else "")


def default_eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """EOS ids from the generation config (may be a list) and the tokenizer."""
    ids: set[int] = set()
    config = getattr(model, "generation_config", None)
    for source in (getattr(config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(source, int):
            ids.add(source)
        elif source is not None:
            ids.update(int(i) for i in source)
    return sorted(ids)
