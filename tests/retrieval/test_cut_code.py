"""A passage cut inside a command or a code block, or cut from the term it describes, is completed from its
section's neighbours."""

from __future__ import annotations

from dataclasses import replace

import pytest
from retrieval_fakes import FakeEmbedder, fake_index

from retrieval.chunking import Chunk, Position
from retrieval.cut_code import Sections, completed
from retrieval.index import HybridIndex
from retrieval.neighbours import JOIN, joined_text
from retrieval.retriever import HybridRetriever

# A page's section as the chunker sees it: prose, then an example command continued over two lines
RESERVATION = (
    "The maint flag marks the reservation as system maintenance for accounting, and ignore_jobs "
    "ignores the jobs still running when it is created.\n"
    "$ scontrol create reservation starttime=2009-02-06T16:00:00 \\\n"
    "   duration=120 user=root flags=maint,ignore_jobs nodes=ALL\n"
    "Reservation created: root_3\n"
)
RUNBOOK = (
    "Collect the evidence before anyone touches the host:\n"
    "```bash\n"
    "ssh root@$H 'ps auxwwf' > \"$D/ps.txt\"\n"
    "ssh root@$H 'ss -tupna' > \"$D/sockets.txt\"\n"
    "ssh root@$H 'journalctl --since -24h' > \"$D/journal.txt\"\n"
    "```\n"
    "Record the SHA-256 of each file so it can be shown later that they have not changed.\n"
)


def cut(section: str, ends: list[int], source: str, heading: str = "Creation", overlap: int = 0) -> list[Chunk]:
    """`section` cut at the offsets `ends` (each chunk starting `overlap` characters before the last end)."""
    chunks, start = [], 0
    for n, end in enumerate([*ends, len(section)]):
        chunks.append(Chunk(f"{source}-{n}", section[start:end], source, source, heading, Position(start, end)))
        start = max(end - overlap, 0)
    return chunks


def test_a_passage_ending_on_a_continued_command_takes_in_the_rest_of_it():
    ends = [RESERVATION.index("   duration")]
    chunks = cut(RESERVATION, ends, "reservations.html", overlap=12)
    first = chunks[0]
    assert first.text.rstrip().endswith("\\")
    whole = completed(first, Sections(chunks))
    assert whole.text == RESERVATION and whole.chunk_id == f"reservations.html-0{JOIN}reservations.html-1"
    assert completed(chunks[1], Sections(chunks)) == chunks[1]  # it ends whole: nothing to take in


def test_a_passage_cut_inside_a_code_fence_is_completed_on_both_sides():
    opening = RUNBOOK.index("ssh root@$H 'ss")
    closing = RUNBOOK.index("ssh root@$H 'journalctl")
    chunks = cut(RUNBOOK, [opening, closing], "security.md")
    sections = Sections(chunks)
    # the first chunk opens the fence and ends inside it: the next two finish the block
    assert completed(chunks[0], sections).text == RUNBOOK
    # the middle chunk starts and ends inside the fence: it takes in both neighbours
    assert completed(chunks[1], sections).text == RUNBOOK
    # the last one starts inside it: the command's lines before it come in
    assert completed(chunks[2], sections).text == RUNBOOK
    # a whole fenced block within one chunk, or prose, is left as it is
    whole = cut(RUNBOOK, [RUNBOOK.index("Record")], "security.md")
    assert completed(whole[0], Sections(whole)) == whole[0] and completed(whole[1], Sections(whole)) == whole[1]


def test_a_passage_ending_on_a_lead_in_takes_in_what_it_introduces_across_an_indentation_gap():
    """Seen in the chat: a passage ending "Check the proxies from the node:", the commands in the next chunk."""
    step = (
        "3. **Probe fails with timeouts.** Check the proxies from the node:\n\n"
        "   ```bash\n   cvmfs_config probe\n   curl -x http://squid01:3128 http://cvmfs-stratum-one/\n   ```\n"
    )
    lead_in = step.index("\n\n   ```")
    fence = step.index("```")  # the splitter dropped the blank line and the indentation: a gap of 5
    chunks = [
        Chunk("a", step[:lead_in], "cvmfs.md", "cvmfs.md", "Fixes", Position(0, lead_in)),
        Chunk("b", step[fence:], "cvmfs.md", "cvmfs.md", "Fixes", Position(fence, len(step))),
    ]
    whole = completed(chunks[0], Sections(chunks))
    assert whole.chunk_id == f"a{JOIN}b" and "cvmfs_config probe" in whole.text and whole.text.endswith("```\n")
    assert whole.text.startswith(step[:lead_in] + "\n\n```bash")  # the break put back, not the indentation
    # the index rebuilds it from its id (the eval's rescore), across the same gap
    assert joined_text(whole.chunk_id, {c.chunk_id: c for c in chunks}) == whole.text
    # a wider gap may hold text the ingest left out: no join
    far = Chunk("b", step[fence:], "cvmfs.md", "cvmfs.md", "Fixes", Position(fence + 9, len(step) + 9))
    assert completed(chunks[0], Sections([chunks[0], far])) == chunks[0]


def test_completion_stops_where_the_section_does_not_go_on():
    chunks = cut(RUNBOOK, [RUNBOOK.index("ssh root@$H 'ss")], "security.md")
    other = Chunk("x", "```\nunrelated\n", "other.md", "other.md", "Creation", Position(0, 14))
    assert completed(other, Sections([*chunks, other])) == other  # alone in its section
    # text no chunk holds between two chunks (a gap of more than a break): the fence count would be a guess
    gap = len(RUNBOOK) - 40
    far = Chunk("far", RUNBOOK[gap:], "security.md", "security.md", "Creation", Position(gap, len(RUNBOOK)))
    assert completed(far, Sections([chunks[0], far])) == far
    # at most MAX_EXTRA neighbours on a side: a fence that never closes takes in two and stops
    open_fence = "```\n" + "".join(f"line {n}\n" for n in range(10))
    pieces = cut(open_fence, [12, 24, 36, 48], "long.md")
    grown = completed(pieces[0], Sections(pieces))
    assert grown.chunk_id.count(JOIN) == 2


# A man page's definition list as the chunker cuts it: the reboot entry's term and first sentences in one
# chunk, the rest of its description (from "ASAP).") in the next two, each naming the entry it goes on with
REBOOT_TERM = "reboot [ASAP] [nextstate={RESUME|DOWN}] {ALL|<NodeList>}"
COMMANDS = (
    "- ping\n- Ping the primary and secondary slurmctld daemon.\n\n"
    f"- {REBOOT_TERM}\n- Reboot the nodes in the system when they become idle. The node is returned to "
    'service "As Soon As Possible" (i.e. ASAP). "ASAP" also sets the node reason. If "nextstate" is '
    '"RESUME", the nodes will resume as normal. You must specify either a list of nodes or ALL nodes.\n\n'
    "- reconfigure\n- Instruct all Slurm daemons to re-read the configuration file.\n"
)


def entry_chunks() -> list[Chunk]:
    cuts = [COMMANDS.index("ASAP). "), COMMANDS.index("If "), COMMANDS.index("- reconfigure")]
    chunks = cut(COMMANDS, cuts, "scontrol.html", heading="COMMANDS")
    entries = ["", REBOOT_TERM, REBOOT_TERM, ""]
    return [replace(chunk, entry=entry) for chunk, entry in zip(chunks, entries, strict=True)]


def test_a_passage_going_on_with_an_entry_takes_in_the_chunk_that_holds_its_term():
    """Seen on the issue's own question: the reboot entry from "ASAP)." on, without its syntax line."""
    chunks = entry_chunks()
    sections = Sections(chunks)
    whole = completed(chunks[1], sections)
    assert whole.text.startswith("- ping") and f"- {REBOOT_TERM}\n" in whole.text
    assert whole.text.endswith("sets the node reason. ")
    assert whole.chunk_id == f"scontrol.html-0{JOIN}scontrol.html-1" and whole.entry == ""
    assert joined_text(whole.chunk_id, {c.chunk_id: c for c in chunks}) == whole.text
    # further down the entry the term is two chunks back: the passage is left as it is
    assert completed(chunks[2], sections) == chunks[2]
    # a chunk that holds its own term, or goes on with none, takes nothing in
    assert completed(chunks[0], sections) == chunks[0] and completed(chunks[3], sections) == chunks[3]
    # a chunk naming an entry whose term the chunk before does not hold takes nothing in either
    stray = replace(chunks[1], entry="reboot_nodes <NodeList>")
    assert completed(stray, Sections([chunks[0], stray])) == stray


@pytest.fixture
def reservation_index() -> tuple[HybridIndex, FakeEmbedder]:
    chunks = [
        *cut(RESERVATION, [RESERVATION.index("   duration")], "reservations.html", overlap=12),
        Chunk("q0", "Slurm is an open source cluster manager.", "quickstart.html", "", "", Position(0, 40)),
        Chunk("n0", "A node in a maintenance reservation shows MAINT.", "sinfo.html", "", "", Position(0, 48)),
    ]
    return fake_index(chunks)


def test_the_retriever_completes_a_cut_example_and_does_not_repeat_its_tail(reservation_index):
    index, embedder = reservation_index
    query = "maint flag reservation accounting ignore_jobs running jobs"
    # neighbours that both rank are joined anyway (neighbours.py): without that, the head stands cut
    cut_passages = HybridRetriever(index, embedder, join_neighbours=False, complete_code=False).retrieve(query, k=4)
    assert cut_passages[0].text.rstrip().endswith("\\") and len(cut_passages) == 4
    passages = HybridRetriever(index, embedder, join_neighbours=False).retrieve(query, k=3)
    assert passages[0].text == RESERVATION
    # the tail is in the first passage now, so it is not given a place of its own
    assert sorted(p.source for p in passages[1:]) == ["quickstart.html", "sinfo.html"]
    # the first k passages do not depend on k, and a saved eval row's id rebuilds the passage
    retriever = HybridRetriever(index, embedder, join_neighbours=False)
    assert all(retriever.retrieve(query, k=k) == retriever.retrieve(query, k=3)[:k] for k in (1, 2, 3))
    chunks = {chunk.chunk_id: chunk for chunk in index.chunks}
    assert joined_text(passages[0].chunk_id, chunks) == RESERVATION
    # near-copies kept or not, asking for more passages than the index can give ends with what there is
    for collapse in (True, False):
        retriever = HybridRetriever(index, embedder, join_neighbours=False, collapse_copies=collapse)
        assert len(retriever.retrieve(query, 9)) == 3
