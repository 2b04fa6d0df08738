"""A GGUF model run by llama.cpp, with the verbs of `CachedLM`: prefill, extend, crop, reset.

The engine and the draft drafter drive it exactly as they drive a transformers model: feed
tokens after the cached ones and read their logits, crop the KV cache back after a
rejected draft. It talks to llama.cpp through llama-cpp-python's C bindings (one context,
one sequence), so only the logits the engine asks for are copied out.

Exactness. Speculation is exact only if a token's logits do not depend on how many
tokens share its pass. Stock llama.cpp on a CPU breaks that in four places, measured on
the default target (`python -m app.bench_llamacpp_rows`, README "Numeric paths"):
- repacked weights (Q4_K -> Q4_Kx8) compute full blocks of 4 rows in another kernel:
  off (`use_extra_bufts`);
- llamafile's tinyBLAS takes f16/f32/bf16 products (attention over the KV cache) from 2
  rows on: flash attention keeps attention out of matrix products;
- flash attention splits the keys of a one-row pass across threads when the cache holds
  512 or more f16/f32 keys, and tiles passes of 64 rows: a bf16 KV cache takes neither;
- its tiled K-quant matmul runs passes of 8 or more rows: verification passes stay at
  MAX_ROWS = 7 (prefill, shared by plain and speculative decoding, still takes it).
With these, a 7-row verification pass gave logits bit-identical to the same tokens fed
one at a time (AVX2 EPYC, 700-token context); `tests/generation/test_llamacpp_lm.py` checks it.

`row_invariant=False` keeps an f16 KV cache instead. Prefill then takes llama.cpp's tiled
flash attention (21% faster for 750 tokens here), but a one-row pass takes the split-key
path, so a token's logits depend on its pass: such a model verifies no drafts
(`max_pass_rows` = 1) and decodes plainly. `numeric_path` picks between the two by measurement.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from generation import llamacpp_log
from generation.errors import ModelError, SpecragError
from generation.gguf_tokenizer import GgufTokenizer
from generation.prompt_snapshot import PromptSnapshot
from generation.token_ids import common_prefix_length

BATCH = 512  # tokens per llama_decode call (llama.cpp's default batch)
OUTPUTS = 32  # logits rows a call may return: sizes llama.cpp's output buffer (512 rows of 151,936 floats: 311 MB)
MAX_ROWS = 7  # from 8 rows on, llama.cpp's tiled K-quant matmul computes rows differently
GGML_TYPE_F16 = 1  # ggml.h; llama.cpp's default KV cache type
GGML_TYPE_BF16 = 30  # ggml.h; the KV cache type that keeps flash attention on its row-wise path
FLASH_ATTN_ENABLED = 1  # llama_flash_attn_type


def available() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class LlamaCppConfig:
    """What callers read from a model's config: vocabulary, usable context, name."""

    vocab_size: int
    max_position_embeddings: int
    _name_or_path: str


@dataclass(frozen=True)
class EosConfig:
    eos_token_id: list[int] = field(default_factory=list)


def vocabulary_tokenizer(gguf: Path) -> GgufTokenizer:
    """The tokenizer a GGUF file carries, loaded without its weights (llama.cpp's `vocab_only`).

    For a torch path that runs the same model: the packaged target's vocabulary held ~48 MB resident this way
    against ~130 MB as transformers' tokenizer, with the same ids on 20,000 chunks of ten corpora."""
    return GgufTokenizer(*_vocabulary_only(gguf))


def _vocabulary_only(gguf: Path) -> tuple[Any, Any, object]:
    """llama.cpp's bindings, a model pointer holding only `gguf`'s vocabulary, and the object that frees it."""
    if not available():
        raise ModelError("reading a GGUF's vocabulary needs llama-cpp-python: pip install 'specrag[models]'")
    from llama_cpp import llama_cpp as bindings

    model = _load_model(bindings, gguf, f"read the vocabulary of {gguf}", vocab_only=True)
    return bindings, model, _Freed(lambda: bindings.llama_model_free(model))


def _load_model(bindings: Any, gguf: Path, what: str, **params: object) -> Any:
    """llama.cpp's model pointer for `gguf`, with these model parameters set; a ModelError saying `what`
    failed and llama.cpp's reason where it does not load."""
    llamacpp_log.route_llama_log()
    llamacpp_log.recent_errors.clear()
    bindings.llama_backend_init()
    model_params = bindings.llama_model_default_params()
    for name, value in params.items():
        setattr(model_params, name, value)
    with llamacpp_log.ctrl_c_after():
        model = bindings.llama_model_load_from_file(str(gguf).encode(), model_params)
    if not model:
        raise ModelError(
            f"llama.cpp could not {what} ({llamacpp_log.why_failed() or 'no reason given'}): "
            "check that it is a complete GGUF model file"
        )
    return model


class _Freed:
    """Calls `free` once nothing refers to it any more (a tokenizer keeps it as its owner)."""

    def __init__(self, free: Callable[[], None]) -> None:
        self._free = free

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit the bindings may be gone already
            self._free()


class LlamaCppLM(PromptSnapshot):
    """One llama.cpp context over a GGUF file, holding one sequence in its KV cache."""

    device = "cpu"
    dtype = "gguf"  # the weights keep the GGUF's own formats (Q4_K, Q6_K...)
    array_library = "numpy"  # logits are numpy arrays: a process that runs only llama.cpp needs no torch

    def __init__(
        self, gguf: Path, n_ctx: int = 8192, threads: int = 2, keep_snapshot: bool = True, row_invariant: bool = True
    ) -> None:
        if not available():
            raise ModelError("the llamacpp path needs llama-cpp-python: pip install 'specrag[models]'")
        from llama_cpp import llama_cpp as bindings

        self._b = bindings
        # no repacking (see the module docstring)
        self._model = _load_model(bindings, gguf, f"load {gguf}", use_extra_bufts=False)
        self.path, self.threads, self.row_invariant = Path(gguf), threads, row_invariant
        vocab = bindings.llama_model_get_vocab(self._model)
        self.vocab_size = bindings.llama_vocab_n_tokens(vocab)
        eos = {bindings.llama_vocab_eos(vocab), bindings.llama_vocab_eot(vocab)} - {-1}
        self.generation_config = EosConfig(sorted(eos))
        # the context (KV cache and compute buffers) is made on first use: `specrag ask` sizes it to its
        # prompt first (shrink_context), so it is never allocated for the worst case while the index is open
        self._ctx = self._memory = None
        self.config = LlamaCppConfig(self.vocab_size, n_ctx, str(self.path))
        self.max_pass_rows = MAX_ROWS if row_invariant else 1  # the widest pass whose rows equal one-row passes
        self._batch = bindings.llama_batch_init(BATCH, 0, 1)
        self.tokens: list[int] = []  # what the KV cache holds, in order
        self.keep_snapshot = keep_snapshot
        self._snapshot: list[int] | None = None  # the last prompt; its positions stay cached until cropped
        self.reused = 0  # how many tokens the last prefill took from the cache

    def tokenizer(self) -> GgufTokenizer:
        """The GGUF's own tokenizer, run by llama.cpp on the vocabulary this model already holds."""
        return GgufTokenizer(self._b, self._model, owner=self)

    @property
    def model(self) -> LlamaCppLM:
        """Callers of CachedLM read `lm.model.config` and `lm.model.generation_config`."""
        return self

    @property
    def cache(self) -> tuple[int, ...]:
        """A snapshot of the KV cache: the tokens it holds (`restore` crops back to them)."""
        return tuple(self.tokens)

    @property
    def length(self) -> int:
        return len(self.tokens)

    def setup(self) -> list[str]:
        kv = [] if self.row_invariant else ["f16"]  # the calibrated costs of the bf16 cache keep their key
        return [str(self.path), str(self.path.stat().st_size), "llama.cpp", str(self.threads), *kv]

    def state_key(self) -> list[str]:
        """What a saved KV cache must have been computed with to be loaded here (prefix_store.py): the
        runner's `setup` (GGUF file, threads, cache type), the file's modification time and llama.cpp's build."""
        import llama_cpp

        return [*self.setup(), str(self.path.stat().st_mtime_ns), llama_cpp.__version__]

    def state_bytes(self) -> memoryview:
        """The KV cache of the sequence, as llama.cpp serialises it (a view of the one copy taken)."""
        size = self._b.llama_state_seq_get_size(self._context, 0)
        buffer = (ctypes.c_ubyte * size)()
        if self._b.llama_state_seq_get_data(self._context, buffer, size, 0) != size:
            raise SpecragError("llama.cpp could not copy out its KV cache")
        return memoryview(buffer).cast("B")

    def load_state(self, token_ids: list[int], payload: memoryview) -> bool:
        """Replace the cache by one `state_bytes` gave for `token_ids` (a writable view: llama.cpp reads it in
        place); False (and an empty cache) if refused."""
        self.reset()
        buffer = (ctypes.c_ubyte * len(payload)).from_buffer(payload)
        if self._b.llama_state_seq_set_data(self._context, buffer, len(payload), 0) != len(payload):
            self.reset()
            return False
        self.tokens, self.reused = list(token_ids), len(token_ids)  # loaded: nothing was computed
        if self.keep_snapshot:
            self._snapshot = list(token_ids)
        return True

    def extend(self, token_ids: list[int], last_only: bool = False) -> np.ndarray:
        """Feed tokens after the cached ones; return logits [n, V] (or [1, V] if last_only)."""
        if not token_ids:
            raise SpecragError("nothing to feed the model")
        if self.length + len(token_ids) > self.config.max_position_embeddings:
            raise SpecragError(
                f"the conversation needs {self.length + len(token_ids)} positions, more than the "
                f"{self.config.max_position_embeddings} of this model's context: start a new conversation"
            )
        rows, step = [], BATCH if last_only else OUTPUTS
        for start in range(0, len(token_ids), step):
            chunk = token_ids[start : start + step]
            wanted = range(len(chunk)) if not last_only else [len(chunk) - 1] if start + step >= len(token_ids) else []
            rows.append(self._decode(chunk, wanted))
        return np.concatenate(rows)

    def _decode(self, chunk: list[int], wanted: range | list[int]) -> np.ndarray:
        batch, base = self._batch, self.length
        for i, token in enumerate(chunk):
            batch.token[i] = token
            batch.pos[i] = base + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = False
        for i in wanted:
            batch.logits[i] = True
        batch.n_tokens = len(chunk)
        llamacpp_log.recent_errors.clear()
        status = self._b.llama_decode(self._context, batch)
        if status != 0:
            self.crop(base)  # a failed batch may have left part of itself cached
            why = llamacpp_log.why_failed() or "no reason given"
            raise SpecragError(f"llama.cpp failed to decode {len(chunk)} tokens (status {status}: {why})")
        self.tokens.extend(chunk)
        if not wanted:
            return np.empty((0, self.vocab_size), dtype=np.float32)
        pointer = ctypes.cast(self._b.llama_get_logits(self._context), ctypes.POINTER(ctypes.c_float))
        return np.ctypeslib.as_array(pointer, (len(wanted), self.vocab_size)).copy()

    def prefill(self, token_ids: list[int]) -> np.ndarray | None:
        """Reset to exactly `token_ids`, keeping the cached common prefix with the last prompt.

        Returns the logits after the last token, or None when the whole prompt was cached."""
        self.crop(self.snapshot_prefix(token_ids))
        self.reused = self.length
        logits = self.extend(token_ids[self.length :], last_only=True) if self.length < len(token_ids) else None
        if self.keep_snapshot:
            self._snapshot = list(token_ids)
        return logits

    def restore(self, snapshot: tuple[int, ...]) -> None:
        """Make the cache hold exactly `snapshot` (a `cache` taken earlier): crop to the common part, feed the rest."""
        self.crop(common_prefix_length(self.tokens, list(snapshot)))
        if self.length < len(snapshot):
            self.extend(list(snapshot[self.length :]), last_only=True)

    def crop(self, length: int) -> None:
        """Keep the first `length` cached positions."""
        if length > self.length or length < 0:
            raise ValueError(f"cannot crop a cache of {self.length} positions to {length}")
        if length < self.length:
            if not self._b.llama_memory_seq_rm(self._memory, 0, length, -1):
                raise SpecragError("llama.cpp could not crop its KV cache")
            del self.tokens[length:]

    @property
    def _context(self) -> Any:
        """The llama.cpp context, made at the configured size on first use."""
        if self._ctx is None:
            self._make_context(self.config.max_position_embeddings)
        return self._ctx

    def _make_context(self, n_ctx: int) -> None:
        b = self._b
        ctx_params = b.llama_context_default_params()
        ctx_params.n_ctx = n_ctx
        ctx_params.n_batch = ctx_params.n_ubatch = BATCH
        ctx_params.n_outputs_max = OUTPUTS
        ctx_params.n_threads = ctx_params.n_threads_batch = self.threads
        ctx_params.flash_attn_type = FLASH_ATTN_ENABLED
        ctx_params.type_k = ctx_params.type_v = GGML_TYPE_BF16 if self.row_invariant else GGML_TYPE_F16
        ctx_params.no_perf = True
        with llamacpp_log.ctrl_c_after():
            self._ctx = b.llama_init_from_model(self._model, ctx_params)
        if not self._ctx:
            raise ModelError(
                f"llama.cpp could not make a context of {n_ctx} tokens for {self.path} "
                f"({llamacpp_log.why_failed() or 'no reason given'}): free some memory or pass a shorter context"
            )
        self._memory = b.llama_get_memory(self._ctx)
        self.config = replace(self.config, max_position_embeddings=b.llama_n_ctx(self._ctx))  # what llama.cpp made

    def shrink_context(self, n_ctx: int) -> bool:
        """Make the context hold only `n_ctx` positions, while it holds nothing yet; True if it shrank.

        `specrag ask` sizes its context before it knows its passages (the worst case, 4,096 positions
        for 6); once they are known, a prompt of 1,700 tokens needs 2,048, and the KV cache and compute
        buffers of the rest are never used. Before first use only the planned size changes; a made,
        empty context is made again; one that holds tokens is left alone (its cache would be lost)."""
        if self.tokens or n_ctx >= self.config.max_position_embeddings:
            return False
        if self._ctx is not None:
            self._b.llama_free(self._ctx)
            self._ctx = self._memory = None
        self.config = replace(self.config, max_position_embeddings=n_ctx)
        self._snapshot = None
        return True

    def reset(self) -> None:
        if self._ctx is not None:  # not made yet: nothing is cached
            self._b.llama_memory_clear(self._memory, True)
        self.tokens = []
        self._snapshot = None

    def close(self) -> None:
        if getattr(self, "_model", None):
            self._b.llama_batch_free(self._batch)
            if self._ctx is not None:
                self._b.llama_free(self._ctx)
            self._b.llama_model_free(self._model)
            self._ctx = self._memory = self._model = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit the bindings may be gone already
            self.close()
