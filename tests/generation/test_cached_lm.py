"""The KV-cache verbs: a trimmed snapshot keeps its prefix and gives the same logits as a fresh prefill."""

import copy

import torch

from generation.cached_lm import CachedLM


def test_trimmed_snapshot_keeps_its_prefix_and_changes_no_logits(target):
    prompt = list(range(10, 70))
    other = prompt[:25] + list(range(100, 140))
    lm = CachedLM(target)
    lm.prefill(prompt)
    assert lm.snapshot_prefix(other) == 25
    lm.trim_snapshot(20)
    assert lm.snapshot_prefix(prompt) == 20  # the tail is gone, the prefix stays
    logits = lm.prefill(other)
    assert lm.reused == 20
    fresh = CachedLM(target, keep_snapshot=False).prefill(other)
    torch.testing.assert_close(logits, fresh)
    lm.trim_snapshot(500)  # longer than the snapshot: nothing to drop
    assert lm.snapshot_prefix(other) == len(other)


def test_a_prefill_reuses_the_prompt_positions_in_the_live_cache_without_copying_and_never_overwritten_ones(target):
    prompt = list(range(10, 70))
    follow = [*prompt, 5, 40, 41]
    lm = CachedLM(target)
    lm.prefill(prompt)
    keys = lm.cache.layers[0]._key_buffer
    lm.extend([5, 6, 7])
    lm.crop(len(prompt) + 1)  # decoding appends after the prompt and rolls back a rejected draft
    logits = lm.prefill(follow)
    assert lm.reused == len(prompt) and lm.cache.layers[0]._key_buffer is keys  # the same buffers, no copy
    assert lm.tokens == follow
    torch.testing.assert_close(logits, CachedLM(target, keep_snapshot=False).prefill(follow))
    lm.crop(30)
    lm.extend([200, 201])  # positions 30 and 31 now hold other tokens than the snapshot's
    assert lm.snapshot_prefix(follow) == 30
    torch.testing.assert_close(lm.prefill(follow), logits)
    assert lm.reused == 30 and lm.tokens == follow
    lm.cache = copy.deepcopy(CachedLM(target).cache)  # a cache put in from outside: which ids it holds is unknown
    assert lm.snapshot_prefix(follow) == 0


def test_the_in_place_cache_gives_the_logits_of_transformers_own_cache_through_growth_and_rollback(target):
    """Prefill, decode past the first buffer growth, roll back a draft, snapshot and restore:
    every step's logits equal those of transformers' concatenating DynamicCache."""
    from transformers import DynamicCache

    from generation.kv_cache import GROWTH_MIN, GrowingLayer

    ours, reference = CachedLM(target, keep_snapshot=False), CachedLM(target, keep_snapshot=False)
    reference.cache = DynamicCache(config=target.config)
    assert all(isinstance(layer, GrowingLayer) for layer in ours.cache.layers)
    prompt = list(range(10, 50))
    torch.testing.assert_close(ours.extend(prompt), reference.extend(prompt), rtol=0, atol=0)
    capacity = ours.cache.layers[0].capacity
    step = 0
    while ours.length <= capacity:  # run past the first growth
        draft = [(7 * step + j) % 200 + 3 for j in range(5)]
        torch.testing.assert_close(ours.extend(draft), reference.extend(draft), rtol=0, atol=0)
        keep = ours.length - 1 - step % 5  # reject part of the draft, as verification does
        ours.crop(keep)
        reference.crop(keep)
        step += 1
    assert ours.cache.layers[0].capacity >= capacity + GROWTH_MIN
    snapshot = copy.deepcopy(ours.cache)
    assert snapshot.layers[0].capacity == ours.length  # snapshots carry no spare room
    ours.extend([5, 6, 7])
    ours.cache = snapshot  # restoring it undoes the extension
    torch.testing.assert_close(ours.extend([9, 8]), reference.extend([9, 8]), rtol=0, atol=0)
    assert ours.length == reference.length
