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
