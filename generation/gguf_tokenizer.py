"""The tokenizer a GGUF file carries, run by llama.cpp, with the few verbs the copilot uses.

A model on llama.cpp already holds its vocabulary, merges and chat template. Tokenizing with it
needs neither transformers (which imports torch whenever torch is installed: ~220 MB of resident
memory) nor a second copy of the vocabulary (the Qwen tokenizer in `tokenizers` is ~100 MB), so
`specrag ask` on llama.cpp stays near the size of its weights. It speaks the subset of transformers'
tokenizer interface the copilot calls (`tokenizer(text)["input_ids"]`, `apply_chat_template`,
`decode`, `convert_ids_to_tokens`, `get_vocab`, `eos_token_id`). The chat template is rendered with
jinja2 in a sandbox with the settings transformers uses (trim_blocks, lstrip_blocks, loop controls,
`tojson`, `raise_exception`), so prompts come out as they did through transformers; tests compare
both on the same template and text. The int4 path tokenizes a packaged model the same way, with the vocabulary
read from its GGUF without the weights (`llamacpp_lm.vocabulary_tokenizer`).
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Sequence
from typing import Any

from generation.errors import ModelError


class GgufTokenizer:
    """The vocabulary of a model llama.cpp has loaded (`bindings`: llama_cpp.llama_cpp, `model`: its pointer,
    `owner`: what frees that model, kept alive here so the vocabulary outlives every other use of it)."""

    def __init__(self, bindings: Any, model: Any, owner: object = None) -> None:
        self._b, self._owner = bindings, owner
        self._vocab = bindings.llama_model_get_vocab(model)
        self._size = bindings.llama_vocab_n_tokens(self._vocab)
        eos = bindings.llama_vocab_eos(self._vocab)
        self.eos_token_id: int | None = eos if eos >= 0 else None
        pad = bindings.llama_vocab_pad(self._vocab)
        self.pad_token_id: int | None = pad if pad >= 0 else None
        template = bindings.llama_model_chat_template(model, None)
        self.chat_template: str | None = template.decode() if template else None
        self._render = None

    def __len__(self) -> int:
        return self._size

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text, add_special_tokens)}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; special tokens written in it (<|im_start|>) become their ids, as in transformers."""
        data = text.encode("utf-8")
        room = len(data) + 8
        while True:
            buffer = (self._b.llama_token * room)()
            count = self._b.llama_tokenize(self._vocab, data, len(data), buffer, room, add_special_tokens, True)
            if count >= 0:
                return list(buffer[:count])
            room = -count  # llama.cpp says how many it needs

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text of `ids`; with `skip_special_tokens` control tokens are left out. Bytes that do not form
        whole UTF-8 characters become U+FFFD, as transformers' byte-level decoder makes them. One difference
        from transformers on the packaged models: the unused padding ids past the real vocabulary
        ("[PAD151665]"...) decode to nothing; no trained model writes them."""
        ids = [int(i) for i in ids]
        if not ids:
            return ""
        tokens = (self._b.llama_token * len(ids))(*ids)
        room = 16 * len(ids) + 16
        while True:
            buffer = ctypes.create_string_buffer(room)
            count = self._b.llama_detokenize(
                self._vocab, tokens, len(ids), buffer, room, False, not skip_special_tokens
            )
            if count >= 0:
                return buffer.raw[:count].decode("utf-8", errors="replace")
            room = -count

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """The vocabulary's own strings for `ids` (byte-level BPE symbols such as "Ġthe")."""
        return [self._b.llama_vocab_get_text(self._vocab, int(i)).decode("utf-8", errors="replace") for i in ids]

    def get_vocab(self) -> dict[str, int]:
        return {token: i for i, token in enumerate(self.convert_ids_to_tokens(range(self._size)))}

    def apply_chat_template(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = False, tokenize: bool = True
    ) -> list[int] | str:
        """The conversation rendered by the model's chat template, as token ids (or text)."""
        if not self.chat_template:
            raise ModelError("this GGUF file carries no chat template")
        if self._render is None:
            self._render = _compile(self.chat_template)
        text = self._render(messages=messages, add_generation_prompt=add_generation_prompt)
        return self.encode(text) if tokenize else text


def _compile(template: str) -> Any:
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render
