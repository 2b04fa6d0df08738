from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.chunking import Chunk, ChunkParams, chunk_document, make_splitter
from retrieval.loaders import Document, Section, load_document

FIXTURES = Path(__file__).parent / "fixtures" / "docs"


def words(text: str) -> int:
    return len(text.split())


def long_doc(paragraphs: int = 30) -> Document:
    body = "\n\n".join(f"Paragraph {i} " + " ".join(f"w{i}_{j}" for j in range(25)) for i in range(paragraphs))
    text = "Intro line.\n\n" + body
    return Document("/x/long.md", "Long", text, (Section("", 0, 12), Section("Body", 13, len(text))), "markdown")


def test_chunks_respect_the_token_budget_and_cut_at_paragraphs():
    params = ChunkParams(chunk_tokens=60, overlap_tokens=0)
    chunks = chunk_document(long_doc(), make_splitter(words, params))
    assert all(words(c.text) <= 60 for c in chunks)
    body = [c for c in chunks if c.heading == "Body"]
    assert len(body) > 5
    assert all(c.text.startswith("Paragraph") for c in body)  # whole paragraphs (26 words) fit: cut between them


def test_offsets_point_back_into_the_document_text():
    doc = long_doc()
    for chunk in chunk_document(doc, make_splitter(words, ChunkParams(40, 10))):
        assert doc.text[chunk.position.start : chunk.position.end] == chunk.text


def test_no_chunk_crosses_a_heading():
    doc = load_document(FIXTURES / "runbook-slurmctld.md")
    chunks = chunk_document(doc, make_splitter(words, ChunkParams(200, 20)))
    assert [c.heading for c in chunks] == ["", "Before you restart", "Restart procedure", "Restart procedure > Verify"]
    assert all(c.title == "Restarting slurmctld" and c.source == doc.source for c in chunks)


def test_overlap_repeats_text_between_neighbours():
    text = " ".join(f"tok{i}" for i in range(300))
    doc = Document("/x/t.txt", "t", text, (Section("", 0, len(text)),), "text")
    first, second, *_ = chunk_document(doc, make_splitter(words, ChunkParams(50, 10)))
    shared = set(first.text.split()) & set(second.text.split())
    assert 5 <= len(shared) <= 10


def test_real_tokenizer_budget(minilm):
    doc = load_document(FIXTURES / "html" / "backup.html")
    chunks = chunk_document(doc, make_splitter(minilm.count_tokens, ChunkParams(24, 4)))
    assert len(chunks) >= 4
    assert all(minilm.count_tokens(c.text) <= 24 for c in chunks)


def test_chunk_ids_are_stable_and_survive_edits_elsewhere():
    doc = long_doc()
    splitter = make_splitter(words, ChunkParams(60, 0))
    before = chunk_document(doc, splitter)
    assert [c.chunk_id for c in before] == [c.chunk_id for c in chunk_document(doc, splitter)]
    assert len({c.chunk_id for c in before}) == len(before)
    edited_text = doc.text.replace("Paragraph 29", "Paragraph twenty-nine")
    edited = Document(
        doc.source, doc.title, edited_text, (doc.sections[0], Section("Body", 13, len(edited_text))), "md"
    )
    after = chunk_document(edited, splitter)
    assert before[1].chunk_id == after[1].chunk_id  # untouched chunk keeps its id
    assert before[-1].chunk_id != after[-1].chunk_id


def test_duplicate_text_gets_distinct_ids():
    para = "the same ten words repeated in two separate paragraphs here"
    text = f"{para}\n\n{para}"
    doc = Document("/x/d.txt", "d", text, (Section("", 0, len(text)),), "text")
    ids = [c.chunk_id for c in chunk_document(doc, make_splitter(words, ChunkParams(16, 0)))]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_indexed_text_prepends_title_and_heading_and_round_trips():
    doc = load_document(FIXTURES / "runbook-slurmctld.md")
    chunk = chunk_document(doc, make_splitter(words, ChunkParams(200, 0)))[-1]
    assert chunk.indexed_text().startswith("Restarting slurmctld > Restart procedure > Verify\n\n")
    assert Chunk.from_dict(chunk.to_dict()) == chunk


def test_bad_params_are_rejected():
    with pytest.raises(ValueError):
        ChunkParams(chunk_tokens=100, overlap_tokens=60)


def test_a_chunk_that_goes_on_with_an_entry_is_labelled_with_its_term(tmp_path):
    from tests.retrieval.test_loaders import _long_entry_page

    path = tmp_path / "scontrol.html"
    path.write_text(_long_entry_page())
    doc = load_document(path)
    chunks = chunk_document(doc, make_splitter(words, ChunkParams(chunk_tokens=60, overlap_tokens=0)))
    term = "reboot [ASAP] [nextstate={RESUME|DOWN}] {ALL|<NodeList>}"
    holding = [c for c in chunks if "- reboot [ASAP]" in c.text]
    going_on = [c for c in chunks if "Sentence 25 says" in c.text]
    assert len(holding) == 1 and holding[0].entry == ""  # it holds the term itself
    assert going_on and all(c.entry == term for c in going_on)
    assert going_on[0].label == f"scontrol > COMMANDS > {term}"
    assert going_on[0].indexed_text().startswith(f"scontrol > COMMANDS > {term}\n\n")  # what is embedded
    nested = next(c for c in chunks if "stays down after rebooting" in c.text)
    assert "- DOWN" not in nested.text
    assert nested.entry == f"{term} > DOWN"  # inside a nested entry: both terms, outermost first
    after = [c for c in chunks if c.text.startswith("Prose sentence")]
    assert after and all(c.entry == "" for c in after)  # prose after the list continues no entry
    assert next(c for c in chunks if c.text.startswith("- ping")).entry == ""


def test_the_entry_is_part_of_a_chunks_id_and_older_rows_read_without_one():
    doc = long_doc()
    splitter = make_splitter(words, ChunkParams(60, 0))
    plain = chunk_document(doc, splitter)
    from retrieval.loaders import Entry

    body = next(s for s in doc.sections if s.heading == "Body")
    with_entry = chunk_document(
        Document(
            doc.source, doc.title, doc.text, doc.sections, doc.kind, (Entry("Param=<x>", body.start, len(doc.text)),)
        ),
        splitter,
    )
    assert [c.text for c in plain] == [c.text for c in with_entry]
    changed = [(a, b) for a, b in zip(plain, with_entry, strict=True) if a.chunk_id != b.chunk_id]
    assert changed and all(b.entry == "Param=<x>" for _, b in changed)  # re-embedded with their new label
    assert all(a.chunk_id == b.chunk_id for a, b in zip(plain, with_entry, strict=True) if not b.entry)
    row = with_entry[-1].to_dict()
    assert Chunk.from_dict(row) == with_entry[-1]
    del row["entry"]
    assert Chunk.from_dict(row).entry == ""


def test_a_chunk_that_only_opens_with_an_entrys_last_lines_is_not_named_after_it():
    from retrieval.loaders import Entry

    closing = "A closing paragraph of Alpha."
    text = (
        "- Alpha=<x>\n- "
        + " ".join(f"Alpha sentence {i} of its long description." for i in range(24))
        + f"\n\n{closing}\n\n- Beta\n- Beta does one thing.\n\n- Gamma\n- Gamma does another thing."
    )
    alpha_end = text.index(closing) + len(closing)
    beta = text.index("- Beta")
    entries = (Entry("Alpha=<x>", 0, alpha_end), Entry("Beta", beta, text.index("\n\n- Gamma")))
    doc = Document("/d/slurm.conf.html", "slurm.conf", text, (Section("PARAMETERS", 0, len(text)),), "html", entries)
    chunks = chunk_document(doc, make_splitter(words, ChunkParams(chunk_tokens=60, overlap_tokens=0)))
    inside = [c for c in chunks if c.text.startswith("Alpha sentence")]
    assert inside and all(c.entry == "Alpha=<x>" for c in inside)  # wholly Alpha's description
    tail = next(c for c in chunks if c.text.startswith(closing))
    assert "- Beta" in tail.text and "- Gamma" in tail.text
    assert tail.entry == ""  # Alpha's last line, then two other entries: not named after Alpha


def test_an_indented_entry_starts_at_its_list_mark(tmp_path):
    """Nested lists are indented: a chunk that starts on the nested term's list mark holds the term."""
    fields = "".join(
        f"<DT>Field{i}<DD>What field {i} reports about the job step, in a dozen words.\n" for i in range(30)
    )
    page = f"<html><body><h1>sstat</h1><h2>OPTIONS</h2><DL><DT>--format<DD>Fields:<DL>{fields}</DL></DL></body></html>"
    path = tmp_path / "sstat.html"
    path.write_text(page)
    doc = load_document(path)
    field = next(e for e in doc.entries if e.term == "Field7")
    assert doc.text[field.start :].startswith("- Field7")
    chunks = chunk_document(doc, make_splitter(words, ChunkParams(chunk_tokens=40, overlap_tokens=0)))
    on_a_term = [c for c in chunks if c.text.startswith("- Field")]
    assert len(on_a_term) > 3
    assert all(c.entry in ("", "--format") for c in on_a_term), [c.entry for c in on_a_term]


def test_an_entrys_term_is_not_left_alone_in_a_chunk(tmp_path):
    """The splitter cuts a long entry's term line from its description; the term joins the chunk after it."""
    from retrieval.chunking import split_with_offsets
    from tests.retrieval.test_loaders import _long_entry_page

    path = tmp_path / "scontrol.html"
    path.write_text(_long_entry_page())
    doc = load_document(path)
    splitter = make_splitter(words, ChunkParams(chunk_tokens=60, overlap_tokens=0))
    term_line = "- reboot [ASAP] [nextstate={RESUME|DOWN}] {ALL|<NodeList>}"
    assert any(text.strip() == term_line for text, _ in split_with_offsets(splitter, doc.text))  # the cut
    chunks = chunk_document(doc, splitter)
    holding = next(c for c in chunks if term_line in c.text)
    assert holding.text.startswith(term_line) and "Sentence 0 says" in holding.text and holding.entry == ""
    assert doc.text[holding.position.start : holding.position.end] == holding.text
    assert not any(c.text.strip() == term_line for c in chunks)
