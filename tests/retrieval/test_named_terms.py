"""An option or setting the question writes out brings the entry that defines it into the passages."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from retrieval_fakes import FakeEmbedder

from retrieval.chunking import Chunk, ChunkParams, Position, chunk_document, make_splitter
from retrieval.index import HybridIndex
from retrieval.loaders import load_document
from retrieval.named_terms import NamedTerms, term_names
from retrieval.retriever import HybridRetriever

MAN = Path(__file__).parent / "fixtures" / "man"
# many chunks about "exclusive" things, so neither retriever ranks the one entry of `--exclusive` first
FILLER = [
    ("sbatch", "the job allocation is exclusive to the user; exclusive nodes are not shared with other jobs"),
    ("sbatch", "exclusive use of nodes: jobs may share nodes unless exclusive, see the exclusive partition"),
    ("srun", "exclusive steps: an exclusive job step gets exclusive CPUs of the job allocation"),
    ("salloc", "an exclusive allocation keeps its nodes exclusive to the job"),
    ("sbatch", "what the exclusive option of a partition does: exclusive sbatch jobs"),
    ("sbatch", "sbatch does exclusive allocation when the partition is exclusive"),
]


def _chunk(n: int, title: str, text: str, terms: tuple[str, ...] = ()) -> Chunk:
    return Chunk(f"c{n}", text, f"{title}.html", title, "OPTIONS", Position(0, len(text)), terms=terms)


def _retriever(chunks: list[Chunk], **options) -> HybridRetriever:
    embedder = FakeEmbedder()
    index = HybridIndex.build(chunks, embedder.embed_documents([c.text for c in chunks]))
    return HybridRetriever(index, embedder, **{"join_neighbours": False, **options})


def test_an_entrys_term_names_its_options_and_its_setting():
    assert term_names("-d, --dependency=<dependency_list>") == {"-d", "--dependency"}
    assert term_names("--exclusive[={user|mcs}]") == {"--exclusive"}
    assert term_names("SlurmctldTimeout") == {"SlurmctldTimeout"}
    assert term_names("MaxJobs=<max_jobs>") == {"MaxJobs"}
    assert term_names("reboot [ASAP] [nextstate=<RESUME|DOWN>]") == {"reboot"}


def test_the_entry_of_a_written_out_option_comes_first_on_the_page_the_question_names():
    chunks = [_chunk(i, title, text) for i, (title, text) in enumerate(FILLER)]
    chunks += [
        _chunk(6, "srun", "--exclusive: this option applies to job and job step allocations", ("--exclusive",)),
        _chunk(7, "sbatch", "--exclusive[={user|mcs}]: the allocation shares no node", ("--exclusive[={user|mcs}]",)),
        _chunk(8, "sbatch", "-s, --oversubscribe: the allocation can over-subscribe", ("-s, --oversubscribe",)),
    ]
    question = "What does the --exclusive option of sbatch do?"
    plain = [c.chunk_id for c in _retriever(chunks, named_terms=False).retrieve(question, k=3)]
    assert "c7" not in plain  # the filler outranks the definition
    passages = _retriever(chunks).retrieve(question, k=3)
    assert passages[0].chunk_id == "c7"  # sbatch's entry, not srun's
    assert [c.chunk_id for c in passages[1:]] == plain[:2]  # the rest keep their order
    beyond = _retriever(chunks, candidates=2).retrieve(question, k=2)[0]  # ranked below the candidates
    assert beyond.chunk_id == "c7" and beyond.score > 0 and set(beyond.ranks) == {"dense", "bm25"}


def test_nothing_moves_when_the_passages_hold_the_entry_or_the_question_writes_no_name():
    chunks = [_chunk(i, title, text) for i, (title, text) in enumerate(FILLER)]
    chunks.append(_chunk(6, "sbatch", "--parsable: print only the job id number", ("--parsable",)))
    plain = _retriever(chunks, named_terms=False).retrieve("What does --parsable do in sbatch?", k=3)
    assert "c6" in [c.chunk_id for c in plain]  # retrieved already
    for question in ("What does --parsable do in sbatch?", "How do I print just the job id from sbatch?"):
        with_terms = [c.chunk_id for c in _retriever(chunks).retrieve(question, k=3)]
        assert with_terms == [c.chunk_id for c in _retriever(chunks, named_terms=False).retrieve(question, k=3)]


def test_an_entry_whose_term_closes_its_chunk_comes_with_its_description():
    # sbatch's man page: "- -x, --exclude=... - ... - --exclusive[={user|mcs}]" ends one chunk, and the next
    # (labelled with the entry it goes on with) holds what the option does
    before = "- -x, --exclude=<node_name_list>\n- Explicitly exclude certain nodes.\n\n"
    term = "- --exclusive[={user|mcs}]\n"
    description = "- The job allocation can not share nodes with other running jobs."
    chunks = [_chunk(i, title, text) for i, (title, text) in enumerate(FILLER)]
    closing = _chunk(6, "sbatch", before + term, ("-x, --exclude=<node_name_list>", "--exclusive[={user|mcs}]"))
    chunks.append(replace(closing, position=Position(0, len(before + term))))
    going_on = replace(_chunk(7, "sbatch", description), entry="--exclusive[={user|mcs}]")
    chunks.append(replace(going_on, position=Position(len(before + term), len(before + term + description))))
    passage = _retriever(chunks, join_neighbours=True).retrieve("What does the --exclusive option of sbatch do?", k=3)[
        0
    ]
    assert passage.text == term + description


def test_a_follow_ups_query_takes_the_page_its_first_line_names():
    chunks = [
        _chunk(0, "sbatch", "--exclusive[={user|mcs}]: the allocation shares no node", ("--exclusive[={user|mcs}]",)),
        _chunk(1, "srun", "--exclusive[={user|mcs}]: for a job step, no shared CPUs", ("--exclusive[={user|mcs}]",)),
    ]
    query = "what about srun?\nWhat does the --exclusive option of sbatch do?"  # conversation.retrieval_query
    assert NamedTerms(chunks).pinned(query, {0: 0, 1: 1}, set()) == {1: "--exclusive"}


def test_a_short_option_is_looked_up_only_on_a_page_the_question_names():
    chunks = [
        _chunk(0, "sinfo", "-R, --list-reasons: list reasons nodes are down or drained", ("-R, --list-reasons",)),
        _chunk(1, "sacct", "-R, --reason: match jobs pending for this reason", ("-R, --reason=<reason_list>",)),
    ]
    terms = NamedTerms(chunks)
    assert terms.pinned("what does sinfo -R show?", {}, set()) == {0: "-R"}
    assert terms.pinned("what does -R show?", {}, set()) == {}  # every page has its own -R
    assert terms.pinned("What does SlurmctldTimeout do?", {}, set()) == {}  # no entry of that name


def test_a_passage_put_first_for_a_name_starts_at_its_entry():
    # slurm.conf's SlurmctldTimeout closed a chunk that went on with another setting's list of levels
    tail = "- debug4\n- Even more debugging messages\n\n"
    entry = "- SlurmctldTimeout\n- The interval, in seconds, that the backup controller waits."
    samples = ["what is SlurmctldTimeout=300 here", "SlurmctldTimeout=120 is what is set", "what is SlurmctldTimeout"]
    chunks = [_chunk(i, "quickstart", text) for i, text in enumerate(samples)]  # the name, not its definition
    chunks.append(
        replace(_chunk(6, "slurm.conf", tail + entry, ("debug4", "SlurmctldTimeout")), entry="SlurmctldSyslogDebug")
    )
    passage = _retriever(chunks).retrieve("What is SlurmctldTimeout?", k=3)[0]
    assert (passage.chunk_id, passage.text, passage.entry) == ("c6", entry, "")
    assert passage.position.start == len(tail)  # provenance still points at the document's characters


def test_chunks_of_a_man_page_record_the_terms_of_the_entries_they_hold():
    doc = load_document(MAN / "nodectl.8")
    splitter = make_splitter(lambda text: len(text.split()), ChunkParams(chunk_tokens=40, overlap_tokens=0))
    chunks = chunk_document(doc, splitter)
    held = [term for chunk in chunks for term in chunk.terms]
    assert sorted(held) == sorted(e.term for e in doc.entries)
    restored = Chunk.from_dict(chunks[-1].to_dict())  # kept through the index's JSON rows
    assert restored == chunks[-1]
    assert Chunk.from_dict({k: v for k, v in chunks[-1].to_dict().items() if k != "terms"}).terms == ()
