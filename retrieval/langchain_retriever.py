"""specrag's hybrid index as a LangChain retriever, for users who build their own chains.

    from retrieval.langchain_retriever import SpecragRetriever
    docs = SpecragRetriever(k=4).invoke("how do I drain a node?")

Each Document carries the chunk text and, in metadata, its source path, title, heading,
chunk id, fused score and per-retriever ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr


class SpecragRetriever(BaseRetriever):
    index_dir: Path | None = None  # None: the default index under the cache root
    k: int = 6
    model_config = ConfigDict(arbitrary_types_allowed=True)
    _hybrid: Any = PrivateAttr(default=None)

    @classmethod
    def from_retriever(cls, hybrid: Any, k: int = 6) -> SpecragRetriever:
        """Wrap an already open retriever (anything with retrieve(query, k))."""
        retriever = cls(k=k)
        retriever._hybrid = hybrid
        return retriever

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self._hybrid is None:
            from retrieval.retriever import open_index

            self._hybrid = open_index(self.index_dir)
        return [
            Document(
                page_content=hit.text,
                metadata={
                    "source": hit.source,
                    "title": hit.title,
                    "heading": hit.heading,
                    "entry": hit.entry,
                    "chunk_id": hit.chunk_id,
                    "score": float(hit.score),
                    "ranks": dict(hit.ranks),
                },
            )
            for hit in self._hybrid.retrieve(query, self.k)
        ]
