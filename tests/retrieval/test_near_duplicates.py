"""A copy of a better-ranked chunk's text gives its place to the next chunk (sibling man pages)."""

from __future__ import annotations

from retrieval_fakes import FakeEmbedder

from retrieval.chunking import Chunk, Position
from retrieval.index import HybridIndex
from retrieval.near_duplicates import distinct, is_copy
from retrieval.retriever import HybridRetriever

SHARED = (
    "--core-spec=<num> Count of specialized cores per node reserved by the job for system operations and "
    "not used by the application. The application will not use these cores, but will be charged for "
    "their allocation."
)


def test_a_text_held_whole_by_another_is_a_copy_and_a_different_one_is_not():
    page = "salloc OPTIONS\n" + SHARED + "\nDefault value is dependent upon the node's configured CoreSpecCount."
    assert is_copy(SHARED, page)
    assert is_copy(SHARED + " Also see --thread-spec.", SHARED)  # 1 new n-gram of 30: still mostly a copy
    assert not is_copy("CoreSpecCount=<count> Number of cores reserved for system use on each node.", SHARED)
    assert not is_copy("", SHARED)
    # a shared heading or a few shared words do not make a copy
    assert not is_copy("Count of specialized cores per node is set in slurm.conf as CoreSpecCount.", SHARED)


def test_distinct_keeps_rank_order_and_stops_at_k():
    texts = {"a": SHARED, "b": "srun OPTIONS " + SHARED, "c": "core_spec: CoreSpecCount", "d": "other", "e": "more"}
    assert distinct("abcde", texts.get, 3) == ["a", "c", "d"]
    assert distinct("bacde", texts.get, 2) == ["b", "c"]  # whichever copy ranks first stays
    assert distinct("cde", texts.get, 5) == ["c", "d", "e"]


def _chunk(n: int, source: str, text: str) -> Chunk:
    return Chunk(f"c{n}", text, source, source.removesuffix(".html"), "OPTIONS", Position(0, len(text)))


def test_hybrid_retriever_shows_the_page_a_copy_was_hiding():
    chunks = [
        _chunk(0, "salloc.html", SHARED),
        _chunk(1, "srun.html", SHARED + " Not supported for job steps."),
        _chunk(2, "sbatch.html", SHARED),
        _chunk(3, "core_spec.html", "Core specialization: CoreSpecCount sets the specialized cores of each node."),
        _chunk(4, "quickstart.html", "Slurm is an open source cluster manager."),
    ]
    embedder = FakeEmbedder()
    index = HybridIndex.build(chunks, embedder.embed_documents([c.text for c in chunks]))
    query = "specialized cores reserved by the job and not used by the application"
    sources = lambda retriever: [c.source for c in retriever.retrieve(query, k=2)]  # noqa: E731

    collapsed, stock = HybridRetriever(index, embedder), HybridRetriever(index, embedder, collapse_copies=False)
    assert set(sources(stock)) <= {"salloc.html", "srun.html", "sbatch.html"}  # two copies of one text
    assert sources(collapsed)[1] == "core_spec.html"
    assert sources(collapsed)[0] == sources(stock)[0]  # the best chunk never moves
    assert len(collapsed.retrieve(query, k=5)) == 3  # every chunk but the two copies
