"""A tiny random Qwen2 as a GGUF file, for llama.cpp tests: 2 layers, 256 wide, Q4_K weights.

Random Q4_K blocks are valid weights (a small scale and offset, random 6-bit sub-scales and
4-bit codes), so the file is a randomly initialised model in the format the packaged models
use, and llama.cpp runs it through the same kernels. The vocabulary is the byte tokenizer's
(tiny.py: 256 byte symbols plus <eos>), so its ids are the tiny transformers models' ids.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter
from tokenizers import pre_tokenizers

from tiny import EOS

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 256, 512, 2, 4, 2
VOCAB = 257  # the byte tokenizer's ids
Q4_K = GGMLQuantizationType.Q4_K


def random_q4k(rows: int, cols: int, rng: np.random.Generator, scale: float = 0.02) -> np.ndarray:
    """`rows` x `cols` weights as random Q4_K blocks (uint8, one row of blocks per weight row)."""
    block, size = GGML_QUANT_SIZES[Q4_K]
    blocks = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    # d and dmin (a block's first two float16s): weight = d * sc * q - dmin * m with 6-bit sc, m and 4-bit q,
    # so d = scale / 150 and dmin = 7.5 d give weights centred on 0 with a spread of about `scale`
    halves = np.array([scale / 150, scale / 20], dtype=np.float16).view(np.uint8)
    blocks[:, :, :4] = halves
    return blocks.reshape(rows, -1)


def write_tiny_gguf(
    path: Path, seed: int = 0, scale: float = 0.02, noise: float = 0.0, chat_template: str | None = None
) -> Path:
    """The tiny model for `seed`; `noise` > 0 changes that share of its weight codes (a draft that mostly agrees)."""
    rng = np.random.default_rng(seed)
    noise_rng = np.random.default_rng(seed + 1000)
    writer = GGUFWriter(str(path), "qwen2")
    writer.add_context_length(4096)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(15)  # MOSTLY_Q4_K_M
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = [*symbols, EOS]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * len(symbols) + [3])  # normal, then control
    writer.add_token_merges([f"{symbols[0]} {symbols[1]}"])
    writer.add_eos_token_id(len(symbols))
    if chat_template is not None:
        writer.add_chat_template(chat_template)

    kv = HIDDEN // HEADS * KV_HEADS

    def matrix(name: str, rows: int, cols: int, weight_scale: float = scale) -> None:
        blocks = random_q4k(rows, cols, rng, weight_scale)
        codes = blocks.reshape(rows, -1, GGML_QUANT_SIZES[Q4_K][1])[:, :, 16:]  # past d, dmin and the sub-scales
        changed = noise_rng.random(codes.shape) < noise
        codes[changed] = noise_rng.integers(0, 256, int(changed.sum()), dtype=np.uint8)
        writer.add_tensor(name, blocks, raw_dtype=Q4_K)

    def vector(name: str, values: np.ndarray) -> None:
        writer.add_tensor(name, values.astype(np.float32))

    matrix("token_embd.weight", VOCAB, HIDDEN, 1.0)
    for i in range(LAYERS):
        vector(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN))
        matrix(f"blk.{i}.attn_q.weight", HIDDEN, HIDDEN)
        vector(f"blk.{i}.attn_q.bias", rng.normal(0, 0.02, HIDDEN))
        matrix(f"blk.{i}.attn_k.weight", kv, HIDDEN)
        vector(f"blk.{i}.attn_k.bias", rng.normal(0, 0.02, kv))
        matrix(f"blk.{i}.attn_v.weight", kv, HIDDEN)
        vector(f"blk.{i}.attn_v.bias", rng.normal(0, 0.02, kv))
        matrix(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        vector(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN))
        matrix(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        matrix(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        matrix(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    vector("output_norm.weight", np.ones(HIDDEN))
    matrix("output.weight", VOCAB, HIDDEN, 0.5)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
