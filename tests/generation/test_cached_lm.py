"""The KV-cache verbs: a trimmed snapshot keeps its prefix and gives the same logits as a fresh prefill."""

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
