"""transformers' own speculative methods for `specrag bench`: prompt lookup and assisted generation.

Both start from the prompt the engine prefilled: `generate(input_ids=prompt, cache=deep copy
of the target cache over prompt[:-1])`, timed around the call. transformers 5.24 assisted
decoding feeds the whole input again on its first iteration even with a filled cache, so
`prepare_inputs_for_generation` is wrapped to feed only what the cache lacks (as its own
`_prefill` does for greedy search); hf-assisted's assistant starts from a deep copy of the
prefilled draft cache. Target passes are counted by wrapping the target forward, and the
first new token is timed with a streamer.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app.bench_report import run_record

PROMPT_LOOKUP_TOKENS = 10


@dataclass
class HFCounts:
    passes: int = 0
    drafted: int = 0
    accepted: int = 0


class FirstTokenClock:
    """A generate() streamer that notes when the first new token arrives (its first put is the prompt)."""

    def __init__(self) -> None:
        self.puts = 0
        self.first_token_at: float | None = None

    def put(self, value: Any) -> None:
        self.puts += 1
        if self.puts == 2 and self.first_token_at is None:
            self.first_token_at = time.perf_counter()

    def end(self) -> None:
        pass


def run_hf(engine: Any, method: str, prompt_ids: list[int], caches: tuple[Any, Any], config: Any) -> dict:
    """One answer by transformers' `method`, from copies of the prefilled (target, draft) caches.

    The record's first_token_s is the wait for the first new token inside generate; the caller adds the prefill."""
    import torch

    model = engine.target.model
    kwargs = hf_kwargs(engine, method, config)
    cache = copy.deepcopy(caches[0])
    assistant_cache = copy.deepcopy(caches[1]) if method == "hf-assisted" else None
    input_ids = torch.tensor([prompt_ids], device=model.device)
    clock = FirstTokenClock()
    torch.manual_seed(config.seed)  # transformers samples from the global generator
    with hf_hooks(model, assistant_cache) as counts:
        start = time.perf_counter()
        output = model.generate(input_ids=input_ids, cache=cache, streamer=clock, **kwargs)
        seconds = time.perf_counter() - start
    tokens = output[0, len(prompt_ids) :].tolist()
    finish = "eos" if tokens and tokens[-1] in engine.eos else "length"
    text = engine.tokenizer.decode(tokens, skip_special_tokens=True)
    first = clock.first_token_at - start if clock.first_token_at is not None else None
    return run_record(tokens, seconds, counts.passes, counts.drafted, counts.accepted, finish, text, first)


def hf_kwargs(engine: Any, method: str, config: Any) -> dict:
    eos = sorted(engine.eos)
    pad = engine.tokenizer.pad_token_id
    kwargs = {
        "max_new_tokens": config.max_new_tokens,
        "eos_token_id": eos,
        "pad_token_id": pad if pad is not None else eos[0],
        "do_sample": not config.sampling.greedy,
    }
    if not config.sampling.greedy:
        kwargs |= {
            "temperature": config.sampling.temperature,
            "top_p": config.sampling.top_p,
            "top_k": config.sampling.top_k,
        }
    if method == "hf-prompt-lookup":
        kwargs["prompt_lookup_num_tokens"] = PROMPT_LOOKUP_TOKENS
    elif method == "hf-assisted":
        kwargs["assistant_model"] = engine.draft.model
    return kwargs


@contextmanager
def hf_hooks(model: Any, assistant_cache: Any) -> Iterator[HFCounts]:
    """Count target passes and drafts, start from a filled cache on the first assisted step, prefill the assistant."""
    counts = HFCounts()
    forward, prepare = model.forward, model.prepare_inputs_for_generation
    make_candidates = model._get_candidate_generator

    @functools.wraps(forward)
    def counted_forward(*args: Any, **kwargs: Any) -> Any:
        counts.passes += 1
        return forward(*args, **kwargs)

    @functools.wraps(prepare)
    def prepare_after_cache(input_ids: Any, **kwargs: Any) -> Any:
        cache = kwargs.get("cache")
        cached = cache.get_seq_length() if cache is not None else 0
        if kwargs.get("next_sequence_length") is None and 0 < cached < input_ids.shape[1]:
            kwargs["next_sequence_length"] = input_ids.shape[1] - cached  # feed only what the cache lacks
        return prepare(input_ids, **kwargs)

    @functools.wraps(make_candidates)
    def candidates_with_counts(*args: Any, **kwargs: Any) -> Any:
        generator = make_candidates(*args, **kwargs)
        if assistant_cache is not None and hasattr(generator, "assistant_kwargs"):
            generator.assistant_kwargs["cache"] = assistant_cache  # it crops what it must re-feed
        update = generator.update_candidate_strategy

        def counted_update(input_ids: Any, scores: Any, num_matches: Any) -> Any:
            counts.drafted += scores.shape[1] - 1  # scores cover the candidates plus the bonus position
            counts.accepted += int(num_matches)
            return update(input_ids, scores, num_matches)

        generator.update_candidate_strategy = counted_update
        return generator

    patches = {
        "forward": counted_forward,
        "prepare_inputs_for_generation": prepare_after_cache,
        "_get_candidate_generator": candidates_with_counts,
    }
    saved = {name: vars(model)[name] for name in patches if name in vars(model)}  # earlier instance-level patches
    for name, patch in patches.items():
        setattr(model, name, patch)
    try:
        yield counts
    finally:
        for name in patches:
            delattr(model, name)
        for name, value in saved.items():
            setattr(model, name, value)
