"""Neighbouring chunks of one section that both rank among the passages join into one passage."""

from __future__ import annotations

from dataclasses import replace

import pytest
from retrieval_fakes import FakeEmbedder, fake_index

from retrieval.chunking import Chunk, Position
from retrieval.index import HybridIndex
from retrieval.neighbours import JOIN, join_neighbours, joined, joined_text
from retrieval.retriever import HybridRetriever, scored_group

SECTION = (
    "reboot [ASAP] [nextstate={RESUME|DOWN}] [reason=<reason>] {ALL|<NodeList>} Reboot the nodes in the list "
    "when they become idle. With ASAP no new jobs start on them until the reboot. With nextstate=RESUME the "
    "nodes return to service once they register again; with nextstate=DOWN they stay down."
)
START = 1000  # where the section stands in its page


def piece(n: int, start: int, end: int, source: str = "scontrol.html", heading: str = "COMMANDS") -> Chunk:
    """The chunk of SECTION[start:end], as the chunker cuts it (text = the page's text at its offsets)."""
    text = SECTION[start:end]
    return Chunk(f"c{n}", text, source, source.removesuffix(".html"), heading, Position(START + start, START + end))


def test_overlapping_or_touching_neighbours_join_into_the_section_text():
    cut = SECTION.index(" With ASAP")
    first, second = piece(0, 0, cut + 30), piece(1, cut, len(SECTION))  # 30 characters in both
    both = joined(first, second)
    assert both is not None and both.text == SECTION and joined(second, first) == both
    assert both.position == Position(START, START + len(SECTION)) and both.chunk_id == f"c0{JOIN}c1"
    inside = piece(2, 10, 40)
    assert joined(first, inside) == replace(first, chunk_id=f"c0{JOIN}c2")
    # the splitter drops the line or paragraph break it cut at: one or two characters
    line = replace(piece(3, cut + 1, len(SECTION)), text=SECTION[cut + 1 :])
    assert joined(piece(4, 0, cut), line).text == SECTION[:cut] + "\n" + SECTION[cut + 1 :]


def test_chunks_that_are_not_neighbours_in_one_section_stay_apart():
    first = piece(0, 0, 60)
    assert joined(first, piece(1, 63, 120)) is None  # a gap of 3: text no chunk kept stands between
    assert joined(first, piece(1, 40, 120, heading="OPTIONS")) is None
    assert joined(first, piece(1, 40, 120, source="sinfo.html")) is None
    moved = replace(piece(1, 40, 120), text="x" * 80)  # offsets that do not locate the texts
    assert joined(first, moved) is None


def test_a_later_neighbour_joins_the_better_group_and_a_bridge_makes_one_group():
    a, b, c, d = piece(0, 0, 60), piece(1, 100, 160), piece(2, 50, 110), piece(3, 0, 10, source="other.html")
    groups = join_neighbours([a, d, b, c], lambda chunk: chunk, window=4)
    # c bridges a and b: one passage, in a's place and led by a (whose scores it takes)
    assert [members[0] for members, _ in groups] == [a, d] and sorted(c.chunk_id for c in groups[0][0]) == [
        "c0",
        "c1",
        "c2",
    ]
    assert groups[0][1].text == SECTION[0:160]
    # outside the window a neighbour stands alone
    assert [members for members, _ in join_neighbours([a, d, c], lambda chunk: chunk, window=2)] == [[a], [d], [c]]


@pytest.fixture
def reboot_index() -> tuple[HybridIndex, FakeEmbedder]:
    cut = SECTION.index(" With ASAP")
    chunks = [
        piece(0, 0, cut + 20),
        piece(1, cut, len(SECTION)),
        Chunk(
            "r0",
            "Reboot a node with the reboot program named in slurm.conf.",
            "slurm.conf.html",
            "",
            "",
            Position(0, 58),
        ),
        Chunk("q0", "Slurm is an open source cluster manager.", "quickstart.html", "", "", Position(0, 40)),
    ]
    return fake_index(chunks)


def test_the_retriever_gives_an_entry_cut_in_two_as_one_passage_and_the_freed_place_to_the_next(reboot_index):
    index, embedder = reboot_index
    query = "reboot the nodes with ASAP and nextstate RESUME so they return to service"
    apart = HybridRetriever(index, embedder, join_neighbours=False).retrieve(query, k=2)
    assert [p.source for p in apart] == ["scontrol.html", "scontrol.html"]
    together = HybridRetriever(index, embedder).retrieve(query, k=2)
    assert together[0].text == SECTION and together[0].score == max(p.score for p in apart)
    assert together[0].scores["dense"] == max(p.scores["dense"] for p in apart)
    assert together[1].source == "slurm.conf.html"
    # the first k passages do not depend on k (the eval ranks 10 and prompts with the first 6)
    retriever = HybridRetriever(index, embedder)
    assert all(retriever.retrieve(query, k=k) == retriever.retrieve(query, k=3)[:k] for k in (1, 2, 3))
    # a saved eval row names the passage by its chunks' ids; the index rebuilds its text
    chunks = {chunk.chunk_id: chunk for chunk in index.chunks}
    assert joined_text(together[0].chunk_id, chunks) == SECTION and joined_text("c0", chunks) == chunks["c0"].text
    assert joined_text(f"c0{JOIN}gone", chunks) is None


def test_a_joined_passage_is_as_close_as_its_closest_chunk():
    # the better-fused chunk (BM25's first) is not the closer one by cosine, which the relevance gate reads
    members = [(0, 0.0486, {"dense": 2, "bm25": 1}), (1, 0.0482, {"dense": 1, "bm25": 5})]
    runs = {"dense": {0: 0.48, 1: 0.55}, "bm25": {0: 9.1, 1: 4.0}}
    passage = scored_group(piece(0, 0, 80), members, runs)
    assert passage.score == 0.0486 and passage.scores == {"dense": 0.55, "bm25": 9.1}
    assert passage.ranks == {"dense": 1, "bm25": 1}
