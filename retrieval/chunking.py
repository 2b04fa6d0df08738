"""Documents -> chunks sized in the embedding model's tokens, cut at headings, then paragraphs.

Each section of a Document is split on its own (so no chunk straddles a heading) by LangChain's
recursive splitter, which prefers paragraph breaks, then line breaks, then sentences, then
words. Offsets are recomputed here: the splitter's own `add_start_index` mixes token and
character units when the length function counts tokens.

Cost is linear in the text: a section longer than BLOCK_CHARS is cut at a paragraph (else line,
else word) boundary into blocks that are split one after another, which also lets a caller show
progress through one large file. Chunk ids of repeated text are numbered in O(1) each: the old
probe loop made a 2 MB file of one repeated paragraph take 7.4 s against 1.2 s for 0.5 MB.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the answering process reads chunks (neighbours.py) and never splits or reads a document
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from retrieval.loaders import Document, Entry

SEPARATORS = ["\n\n", "\n", ". ", "; ", ", ", " ", ""]
# Blocks of 256 K characters hold ~700 chunks: the seam (a chunk boundary without overlap) is rare,
# and a 16 MB file reports progress 64 times.
BLOCK_CHARS = 1 << 18
Progress = Callable[[int], None]  # called with the number of characters just chunked


@dataclass(frozen=True)
class ChunkParams:
    chunk_tokens: int = 200
    overlap_tokens: int = 32

    def __post_init__(self) -> None:
        if self.chunk_tokens < 16 or not 0 <= self.overlap_tokens < self.chunk_tokens // 2:
            raise ValueError(f"need chunk_tokens >= 16 and 0 <= overlap_tokens < chunk_tokens/2, got {self}")


@dataclass(frozen=True)
class Position:
    """Character offsets into the loaded document text; `page` is 1-based for PDFs."""

    start: int
    end: int
    page: int | None = None


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    text: str
    source: str
    title: str
    heading: str
    position: Position
    # The term of the definition-list entry (a man page's option or command) whose description the
    # chunk goes on with, when the chunk does not hold the term itself; "" elsewhere.
    entry: str = ""
    # The terms of the definition-list entries that start in the chunk (`--exclusive[={user|mcs}]`,
    # `SlurmctldTimeout`): what retrieval/named_terms.py looks a question's option or setting up in.
    terms: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """'title > heading', and the entry it continues, the context a reader (and the retrievers)
        see before the text."""
        return " > ".join(p for p in (self.title, self.heading, self.entry) if p)

    def indexed_text(self) -> str:
        """What the embedder and BM25 see: the label (title, heading, entry) prepended to the text."""
        return f"{self.label}\n\n{self.text}" if self.label else self.text

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict) -> Chunk:
        fields = {k: row[k] for k in ("chunk_id", "text", "source", "title", "heading")}
        position = Position(**row["position"])
        return cls(**fields, position=position, entry=row.get("entry", ""), terms=tuple(row.get("terms", ())))


def make_splitter(count_tokens: Callable[[str], int], params: ChunkParams) -> RecursiveCharacterTextSplitter:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(
        separators=SEPARATORS,
        keep_separator="end",
        chunk_size=params.chunk_tokens,
        chunk_overlap=params.overlap_tokens,
        length_function=count_tokens,
    )


@dataclass(frozen=True)
class ChunkRecipe:
    """What another process needs to chunk exactly as the embedder counts tokens (picklable)."""

    tokenizer_file: str
    params: ChunkParams


@cache
def splitter_for(recipe: ChunkRecipe) -> RecursiveCharacterTextSplitter:
    from retrieval.embeddings import count_tokens_with, file_tokenizer

    counter = file_tokenizer(Path(recipe.tokenizer_file))
    return make_splitter(partial(count_tokens_with, counter), recipe.params)


def chunk_document(
    doc: Document, splitter: RecursiveCharacterTextSplitter, progress: Progress | None = None
) -> list[Chunk]:
    """Split every section; ids are stable across re-ingests while the chunk's content is unchanged."""
    chunks, seen = [], Counter()
    for section in doc.sections:
        body = doc.section_text(section)
        for block_start, block in blocks(body):
            pieces = split_with_offsets(splitter, block)
            for text, offset in with_terms_joined(pieces, block, section.start + block_start, doc.entries):
                start = section.start + block_start + offset
                entry = continued_entry(doc.entries, start, start + len(text))
                context = " > ".join(p for p in (section.heading, entry) if p)
                chunk_id = _unique(chunk_hash(doc.source, context, text), seen)
                position = Position(start, start + len(text), section.page)
                terms = tuple(e.term for e in doc.entries if start <= e.start < start + len(text))
                chunks.append(Chunk(chunk_id, text, doc.source, doc.title, section.heading, position, entry, terms))
            if progress is not None:
                progress(len(block))
    return chunks


def with_terms_joined(
    pieces: list[tuple[str, int]], block: str, block_start: int, entries: Sequence[Entry]
) -> list[tuple[str, int]]:
    """`pieces` of `block` (text, offset), with a piece that holds nothing but an entry's term line(s)
    joined to the next one when that goes on with the entry's description: the splitter cuts a long
    entry's term from its description (`- reboot [ASAP] [nextstate=...]` alone, 76 characters), and the
    term then stood as a chunk that answers nothing, beside a description that never named it."""
    by_start = {e.start: e for e in entries if e.body is not None}
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(pieces):
        text, offset = pieces[i]
        start, end = block_start + offset, block_start + offset + len(text)
        entry = by_start.get(start)
        if entry and i + 1 < len(pieces) and end <= entry.body and block_start + pieces[i + 1][1] < entry.end:
            following, at = pieces[i + 1]
            out.append((block[offset : max(at + len(following), offset + len(text))], offset))
            i += 2
            continue
        out.append((text, offset))
        i += 1
    return out


def continued_entry(entries: Sequence[Entry], start: int, end: int) -> str:
    """The terms of the entries (outermost first) that the chunk text[start:end] goes on with, without
    their term line, for at least half its length: scontrol's `reboot [ASAP] [nextstate=...]` for the
    second chunk of what it does, which without it never names the command. A chunk that only opens
    with an entry's last lines (the overlap with the chunk before) and goes on to others is not named
    after it."""
    return " > ".join(
        e.term for e in entries if e.start < start < e.end and 2 * (min(e.end, end) - start) >= end - start
    )


def blocks(text: str, size: int = BLOCK_CHARS) -> Iterator[tuple[int, str]]:
    """(offset, piece) covering text, each at most `size` long unless no boundary was found."""
    start = 0
    while len(text) - start > size:
        end = _boundary(text, start, start + size)
        yield start, text[start:end]
        start = end
    yield start, text[start:]


def _boundary(text: str, start: int, limit: int) -> int:
    """The last paragraph, line or word break in the second half of text[start:limit], else limit."""
    for separator in ("\n\n", "\n", " "):
        cut = text.rfind(separator, start + (limit - start) // 2, limit)
        if cut >= 0:
            return cut + len(separator)
    return limit


def split_with_offsets(splitter: RecursiveCharacterTextSplitter, text: str) -> list[tuple[str, int]]:
    """Pieces with their offsets in text; pieces are substrings that only move forward."""
    pieces, cursor = [], 0
    for piece in splitter.split_text(text):
        found = text.find(piece, cursor)
        offset = found if found >= 0 else cursor
        pieces.append((piece, offset))
        cursor = offset + 1
    return pieces


def chunk_hash(source: str, heading: str, text: str) -> str:
    return hashlib.blake2b(f"{source}\0{heading}\0{text}".encode(), digest_size=8).hexdigest()


def _unique(chunk_id: str, seen: Counter[str]) -> str:
    """chunk_id, then chunk_id-2, chunk_id-3... for repeats (hex ids never contain '-')."""
    seen[chunk_id] += 1
    return chunk_id if seen[chunk_id] == 1 else f"{chunk_id}-{seen[chunk_id]}"
