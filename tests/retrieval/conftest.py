from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # for retrieval_fakes (tests run with --import-mode=importlib)

from retrieval_fakes import FakeEmbedder  # noqa: E402

FIXTURE_DOCS = HERE / "fixtures" / "docs"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A private copy of the fixture corpus (tests may edit it)."""
    return Path(shutil.copytree(FIXTURE_DOCS, tmp_path / "docs"))


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture(scope="session")
def minilm():
    """The real packaged all-MiniLM-L6-v2, loaded once for the session."""
    from retrieval.embeddings import Embedder

    return Embedder.load()


def make_pdf(
    path: Path, pages: list[str], title: str | None = None, outline: list[tuple[str, int, int | None]] = ()
) -> Path:
    """A small text PDF (Helvetica, a page's text line by line) written with pypdf's public API; `outline` adds
    bookmarks (title, 0-based page, index of the parent bookmark or None)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        shown = " 0 -14 Td ".join(f"({line}) Tj" for line in text.split("\n"))  # a line of the page each
        stream.set_data(f"BT /F1 11 Tf 72 720 Td {shown} ET".encode("latin-1"))
        page.replace_contents(stream)
    if title:
        writer.add_metadata({"/Title": title})
    marks = []
    for text, page, parent in outline:
        marks.append(writer.add_outline_item(text, page, parent=None if parent is None else marks[parent]))
    writer.write(path)
    return path


@pytest.fixture(scope="session")
def pdf_maker():
    return make_pdf
