"""The query side of an index's embedding model, without importing sentence-transformers.

A server or `specrag ask` embeds one short question at a time. Importing sentence-transformers
for that pulls in scikit-learn, SciPy's stats, pandas and PIL: +207 MB of resident memory and
~9 s of start-up on a 2-core machine, in a process whose budget is the target model's weights.

A sentence-transformers folder made of exactly a Transformer module, a Pooling module with
mean or CLS pooling and optionally Normalize (all-MiniLM-L6-v2, the bge and e5 families) is
the model card's plain transformers recipe: tokenize with the folder's tokenizer (truncated
to `max_seq_length`), run the encoder, pool, normalise. `load_query_embedder` runs that with
transformers, which the copilot imports anyway for the target's tokenizer. Any other layout
(dense layers, max pooling, prompts, custom code) goes to sentence-transformers itself
(`retrieval.embeddings.Embedder`), so an unknown model is never embedded differently from how
the index was built. `tests/retrieval/test_query_embedder.py` checks the vectors against
sentence-transformers' own.

Ingest keeps sentence-transformers: it embeds thousands of chunks, batched and in bf16 where
the CPU has it, and its import is paid once per ingest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embeddings import (
    CountsTokens,
    Embedder,
    normalized_rows,
    resolve_model,
    resolve_precision,
    token_counter,
    tokenizer_file_of,
    torch_threads,
)
from retrieval.errors import EmbeddingModelError

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_OTHER_POOLING = ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens")


def plain_recipe(path: Path) -> dict[str, Any] | None:
    """The folder's pooling and length when it is the plain Transformer -> Pooling (-> Normalize)
    layout, else None (then only sentence-transformers knows how to embed with it)."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        types = [m["type"] for m in modules]
        if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]) or modules[0]["path"]:
            return None
        pooling = json.loads((path / modules[1]["path"] / "config.json").read_text(encoding="utf-8"))
        bert = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
        prompts = path / "config_sentence_transformers.json"
        if prompts.is_file() and json.loads(prompts.read_text(encoding="utf-8")).get("prompts"):
            return None  # a model that prefixes queries ("query: ...") is left to sentence-transformers
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    modes = [m for m in ("pooling_mode_mean_tokens", "pooling_mode_cls_token") if pooling.get(m)]
    if len(modes) != 1 or any(pooling.get(m) for m in _OTHER_POOLING) or bert.get("do_lower_case"):
        return None
    return {
        "pooling": "mean" if modes[0] == "pooling_mode_mean_tokens" else "cls",
        "dim": int(pooling["word_embedding_dimension"]),
        "max_tokens": int(bert.get("max_seq_length") or 512),
        "normalize": types[-1] == _NORMALIZE,
    }


class QueryEmbedder(CountsTokens):
    """Embeds questions with transformers alone, as sentence-transformers embeds them (see module doc).

    Same interface as `Embedder` for the retriever: `model_id`, `path`, `dim`, `max_tokens`,
    `count_tokens`, `embed_query`, `embed_documents` (for a few texts, e.g. a test)."""

    def __init__(self, model_id: str, path: Path, recipe: dict[str, Any], precision: str = "auto") -> None:
        self.precision = resolve_precision(precision)
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        bars_were_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            self.model = AutoModel.from_pretrained(str(path), local_files_only=True, dtype=torch.float32).eval()
        except (OSError, ValueError) as err:
            raise EmbeddingModelError(f"cannot load the embedding model at {path}: {err}") from err
        finally:
            if bars_were_on:
                hf_logging.enable_progress_bar()
        if self.precision == "bfloat16":  # cast after a float32 load, as Embedder does
            self.model.to(torch.bfloat16)
        self.model_id, self.path = model_id, path
        self.pooling, self.dim, self.max_tokens = recipe["pooling"], recipe["dim"], recipe["max_tokens"]
        self.normalize = recipe["normalize"]
        self.tokenizer_file = tokenizer_file_of(path)
        self._counter = token_counter(self.tokenizer_file, self.tokenizer)

    def embed_documents(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate([self.embed_query(text) for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        import torch

        # stripped and truncated as sentence-transformers' Transformer.tokenize does
        batch = self.tokenizer(
            [text.strip()], padding=True, truncation="longest_first", max_length=self.max_tokens, return_tensors="pt"
        )
        # one thread for one short query: see Embedder.embed_query
        with torch_threads(1), torch.inference_mode():
            tokens = self.model(**batch).last_hidden_state
        if self.pooling == "cls":
            pooled = tokens[:, 0]
        else:  # mean over the real tokens, as sentence-transformers' Pooling computes it (sums in float32)
            mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            total = (tokens * mask).sum(dim=1, dtype=torch.float32)
            pooled = (total / torch.clamp(mask.sum(dim=1, dtype=torch.float32), min=1e-9)).to(tokens.dtype)
        if self.normalize:  # the Normalize module runs in the model's dtype; bf16 rounds here
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return normalized_rows(pooled)


def load_query_embedder(model: str | Path | None = None, precision: str = "auto") -> QueryModel:
    """The embedder a reader of an index needs: `QueryEmbedder` for a plain layout, else sentence-transformers."""
    model_id, path = resolve_model(model)
    recipe = plain_recipe(path)
    if recipe is None:
        return Embedder(model_id, path, precision=precision)
    return QueryEmbedder(model_id, path, recipe, precision)


QueryModel = Embedder | QueryEmbedder  # what a retriever embeds its queries with
