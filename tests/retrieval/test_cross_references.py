"""A chunk of nothing but man page references ("slurm.conf(5), slurmctld(8)") is passed over by retrieval."""

from __future__ import annotations

from retrieval_fakes import FakeEmbedder

from retrieval.chunking import Chunk, Position
from retrieval.cross_references import only_references
from retrieval.index import HybridIndex
from retrieval.retriever import HybridRetriever


def test_only_a_list_of_references_counts():
    assert only_references("slurm.conf(5)")
    assert only_references("slurm.conf(5), slurmctld(8)\n")
    assert only_references("sbatch(1); cgroups(7)")
    assert not only_references("See slurm.conf(5) for the full list.")
    assert not only_references("NodeName=tux[0-7] Name=bandwidth Count=4G")  # a short chunk with content stays
    assert not only_references("")


def _chunk(n: int, source: str, heading: str, text: str) -> Chunk:
    return Chunk(f"c{n}", text, source, source.removesuffix(".html"), heading, Position(0, len(text)))


def test_a_see_also_chunk_gives_its_place_to_a_passage():
    chunks = [
        _chunk(0, "slurmd.html", "SEE ALSO", "slurm.conf(5), slurmctld(8)"),
        _chunk(1, "cgroup.conf.html", "SEE ALSO", "slurm.conf(5)"),
        _chunk(2, "scontrol.html", "COMMANDS", "show config: print the slurm.conf settings the controller runs with"),
        _chunk(3, "quickstart.html", "Overview", "Slurm is an open source cluster manager."),
    ]
    embedder = FakeEmbedder()
    index = HybridIndex.build(chunks, embedder.embed_documents([c.text for c in chunks]))
    query = "slurm.conf"
    kept = [c.source for c in HybridRetriever(index, embedder, skip_references=False).retrieve(query, k=4)]
    skipped = [c.source for c in HybridRetriever(index, embedder).retrieve(query, k=4)]
    assert {"slurmd.html", "cgroup.conf.html"} <= set(kept)
    assert "scontrol.html" in skipped and not {"slurmd.html", "cgroup.conf.html"} & set(skipped)
