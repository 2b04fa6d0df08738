"""Retrieval: documents -> token-aware chunks -> MiniLM vectors (FAISS) + BM25 -> fused ranked chunks.

Entry points: `retrieval.ingest.ingest` (incremental, atomic), `retrieval.retriever.open_index`
(-> HybridRetriever.retrieve(query, k), the live generation as it is now),
`retrieval.live.LiveRetriever` (for servers: follows new generations per query, no restart),
`retrieval.store.default_index_dir`. Importing this
package is cheap; torch and sentence-transformers load only when a model is needed.
"""
