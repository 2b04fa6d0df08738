"""A tiny hand-wired chat model and a fixture runbook for the web tests: readable, copying, instant.

A random tiny Qwen2 writes byte noise and copies nothing, so a browser test could not see
provenance marks. This one is a bigram machine: one layer whose attention and MLP write
nothing, one-hot byte embeddings, and an output head that maps each byte token of CYCLE to the
next one (every other byte to CYCLE's first). Whatever the prompt, it answers CYCLE over and
over; CYCLE's characters are all distinct, so that map is well defined. GLYPHS_DOC quotes
CYCLE, so the n-gram drafter copies it from that passage and the page shows the marks. CYCLE
ends with a citation, [1], as the copilot shows no answer that cites none of its passages.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

sys.path.insert(0, str(Path(__file__).parents[1] / "generation"))

from tiny import byte_tokenizer

CYCLE = " Cwm_fjord-bank/glyphs.vext,quiz;[1]"
FIXTURE_DOCS = {
    "glyphs.md": "# Glyph banks\n\n## Rotation\n\nThe rotation phrase of the glyph bank is"
    f"{CYCLE}{CYCLE} and it is read out at every shift change.\n",
    "munge.md": "# Munge\n\n## Keys\n\nMunge keys live in /etc/munge/munge.key and must be identical on every "
    "node. Restart munge after you copy the key.\n",
    "drain.md": "# Draining nodes\n\n## Drain\n\nTo drain a node run scontrol update nodename=NODE state=drain "
    "reason=maintenance and wait for the jobs to finish.\n",
}
_HIDDEN = 272  # > 257 bytes, so every byte gets its own axis


def bigram_chat_model() -> Qwen2ForCausalLM:
    assert len(set(CYCLE)) == len(CYCLE), "CYCLE must not repeat a character"
    config = Qwen2Config(
        vocab_size=257,
        hidden_size=_HIDDEN,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=256,
    )
    model = Qwen2ForCausalLM(config).eval()
    codes = byte_tokenizer()(CYCLE, add_special_tokens=False)["input_ids"]
    successor = {a: b for a, b in zip(codes, codes[1:] + codes[:1], strict=True)}
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(257, _HIDDEN))
        model.model.layers[0].self_attn.o_proj.weight.zero_()
        model.model.layers[0].mlp.down_proj.weight.zero_()
        head = torch.zeros(257, _HIDDEN)
        for byte in range(257):
            head[successor.get(byte, codes[0]), byte] = 1.0
        model.lm_head.weight.copy_(head)
    return model


def save_chat_model(folder: Path) -> Path:
    """The bigram model and the byte tokenizer as a Hugging Face folder (what --target/--draft load)."""
    folder.mkdir(parents=True, exist_ok=True)
    bigram_chat_model().save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder


def write_fixture_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in FIXTURE_DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder
