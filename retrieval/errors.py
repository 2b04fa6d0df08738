"""The errors the retrieval layer shows to users; each message says what to do next."""

from __future__ import annotations

from core.errors import SpecragError


class RetrievalError(SpecragError):
    """Base class for index, ingest and search problems."""


class IndexNotFoundError(RetrievalError):
    """No index exists where one was expected."""


class IndexMismatchError(RetrievalError):
    """The index was built with another embedding model, chunking or format version."""


class IndexCorruptError(RetrievalError):
    """The index directory exists but its files cannot be read back."""


class IndexBusyError(RetrievalError):
    """Another ingest holds the index lock."""


class InvalidArgumentError(RetrievalError, ValueError):
    """An argument that can never work (e.g. k < 1); also a ValueError for API callers."""


class EmbeddingModelError(RetrievalError):
    """The sentence-transformers model cannot be found or loaded."""


class SkipFile(Exception):
    """Raised by a loader: this file cannot be indexed; the message is the reason."""
