"""Tiny randomly initialised models and a byte-level tokenizer for fast offline tests."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

EOS = "<eos>"


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """One token per byte (the 256 byte-level symbols) plus an EOS token: ids 0..256."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: i for i, symbol in enumerate(sorted(alphabet))}
    vocab[EOS] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS)
    return fast


def tiny_lm(
    seed: int,
    vocab_size: int = 257,
    hidden: int = 64,
    layers: int = 2,
    sharpness: float = 1.0,
    heads: int = 4,
    kv_heads: int = 2,
) -> Qwen2ForCausalLM:
    """A random 2-layer Qwen2; `sharpness` scales the output head (larger = peakier, more repetitive)."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=4096,  # the copilot prompt alone (system + demonstration) is ~1.9k byte tokens
        tie_word_embeddings=False,
        eos_token_id=vocab_size - 1,
    )
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpness)
    return model


def tiny_target_and_draft() -> tuple[Qwen2ForCausalLM, Qwen2ForCausalLM]:
    """A peaky tiny target (it repeats itself, so copies get accepted) and a noisy copy as draft."""
    import copy

    target = tiny_lm(seed=0, sharpness=20.0)
    draft = copy.deepcopy(target)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in draft.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.02)
    return target, draft


def tiny_wide_head_lm(seed: int, sharpness: float = 1.0) -> Qwen2ForCausalLM:
    """Like tiny_lm but with the real models' head size (128): small enough for CI, wide enough
    that float32 eager attention is not row invariant here (a 17-row pass was 0.004 off)."""
    return tiny_lm(seed, hidden=512, sharpness=sharpness, heads=4, kv_heads=2)
