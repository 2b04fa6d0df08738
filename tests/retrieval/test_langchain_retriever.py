"""The hybrid index plugs into LangChain as a BaseRetriever."""

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

from retrieval.ingest import ingest
from retrieval.langchain_retriever import SpecragRetriever
from retrieval.retriever import open_index


def test_the_index_answers_langchain_invoke_with_documents_and_metadata(docs, fake, tmp_path):
    ingest([docs], tmp_path / "index", embedder=fake)
    retriever = SpecragRetriever.from_retriever(open_index(tmp_path / "index", embedder=fake), k=3)
    assert isinstance(retriever, BaseRetriever)
    found = retriever.invoke("munge key")
    assert 1 <= len(found) <= 3 and all(isinstance(d, Document) for d in found)
    assert "munge" in found[0].metadata["source"].lower()
    assert {"source", "title", "heading", "chunk_id", "score", "ranks"} <= set(found[0].metadata)


def test_it_composes_in_a_chain(docs, fake, tmp_path):
    ingest([docs], tmp_path / "index", embedder=fake)
    retriever = SpecragRetriever.from_retriever(open_index(tmp_path / "index", embedder=fake), k=2)
    chain = retriever | RunnableLambda(lambda documents: [d.metadata["source"] for d in documents])
    sources = chain.invoke("drain a gpu node")
    assert len(sources) == 2 and all(isinstance(s, str) for s in sources)
