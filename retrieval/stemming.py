"""BM25's English stemmer, in a module of its own: the answer checks (app/copilot/borrowed.py) stem
words as BM25 does, in an `ask` process that searches elsewhere (app/copilot/search_process.py) and
would otherwise map FAISS, bm25s and SciPy (retrieval/index.py's imports) only to get it."""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def english_stemmer() -> Any:
    """PyStemmer's English stemmer, as BM25 stems with it (the answer checks stem words the same way)."""
    import Stemmer

    return Stemmer.Stemmer("english")
