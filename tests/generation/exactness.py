"""Exactness checks shared by every numeric path's tests."""

import torch

from generation.cached_lm import CachedLM
from generation.engine import Engine, GenerationConfig

WIDEST = 17  # the engine's widest verification pass: the last token plus max_draft = 16 drafted


def assert_widest_pass_matches_plain_steps(model: torch.nn.Module, vocab: int = 257) -> None:
    """A token decoded plainly and the same token verified in the widest pass get bit-identical logits."""
    lm = CachedLM(model, keep_snapshot=False)
    generator = torch.Generator().manual_seed(0)
    context = torch.randint(0, vocab, (300,), generator=generator).tolist()
    new = torch.randint(0, vocab, (WIDEST,), generator=generator).tolist()
    lm.extend(context)
    plain = torch.stack([lm.extend([token])[-1].clone() for token in new])
    lm.crop(len(context))
    assert torch.equal(lm.extend(new), plain)


def assert_greedy_speculation_matches_plain(engine: Engine) -> None:
    """Every speculation mode, with the policy's draft length and with 16, decodes plain's tokens."""
    prompt = torch.randint(0, 256, (120,), generator=torch.Generator().manual_seed(2)).tolist()
    chunks = [prompt[10:60], prompt[70:110]]
    plain = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=40, speculation="none"))
    for mode in ("ngram", "model", "hybrid"):
        for length in (None, 16):
            config = GenerationConfig(max_new_tokens=40, speculation=mode, draft_length=length, min_draft_confidence=0)
            assert engine.complete(prompt, chunks, config).token_ids == plain.token_ids, (mode, length)
