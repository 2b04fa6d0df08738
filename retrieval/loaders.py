"""Per-format readers: one file becomes a Document (plain text plus heading-delimited sections).

Loaders know nothing about tokens, chunks or the index. A file that cannot be indexed raises
`SkipFile` with a one-line reason; nothing here ever aborts a whole ingest. Sections hold
character offsets into `Document.text` (for PDFs, also a page number), so every chunk can
point back to where it came from.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from copy import deepcopy
from dataclasses import dataclass, replace
from itertools import takewhile
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.errors import SkipFile
from retrieval.man_pages import is_man_page_name, man_page_html

if TYPE_CHECKING:
    from lxml.html import HtmlElement
    from markdown_it.token import Token
    from trafilatura.settings import Document as TrafilaturaDocument

KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",  # Docusaurus pages: Markdown with JSX, read as Markdown
    ".txt": "text",
    ".rst": "rst",
    ".rest": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}
# Bump a kind's revision when its reader's text changes: the next ingest reads indexed files of
# that kind again, as if they had changed (2: html keeps the lines of <pre> blocks; 3: a blank line
# before each definition-list entry, so chunks keep a term with its description; 4: generated
# manuals keep their headings and the terms they define, see `_extract` and `_keep_headings_and_terms`;
# 5: pages written as preformatted text keep their paragraphs, `_mark_code_paragraphs`; a term linked to
# the first of several entries of its name is text too, and a permalink mark is dropped,
# `_keep_headings_and_terms`; 6: definition-list entries are located, so a chunk that goes on with an
# entry's description is labelled with its term, `_entries`; 7: where an entry's description starts, so
# a chunk of nothing but its term joins the next, `chunking.with_terms_joined`; 8: an example inside a list
# item or entry starts and ends its own lines, `_tree_with_pre_as_code`, and chunks record the terms of the
# entries they hold, `Chunk.terms`). Markdown 2: front matter
# is metadata (its `title` names the page), not a heading and not text; 3: a heading's inline HTML is no part of
# its name (`_heading_text`). PDF 2: bookmarks name the pages; 3: running heads and feet are left out
# (`without_running_heads`). Man 2: a `.TP` without a body before `.RE` no longer nests the options after it
# (man_pages.py).
READER_REVISIONS = {"html": 8, "markdown": 3, "pdf": 3, "man": 2}
DEFAULT_MAX_BYTES = 20 * 2**20
DOCX_MAX_UNPACKED = 256 * 2**20  # a .docx is a zip: one that would unpack to more is skipped, not inflated
MAX_TERM_CHARS = 160  # an entry's term as a chunk's context line; longer ones are cut
SNIFF_BYTES = 8192
GZIP_SUFFIX = ".gz"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_MARK = re.compile(r"\u27e6specrag-h(\d+)\u27e7")  # printable, so trafilatura keeps it
_SPAN_MARK = re.compile(r"\u27e6specrag-([tdu])(\d+)\u27e7")  # where an entry, its description start and end
_NON_SPACE = re.compile(r"\S")
_INDENT = re.compile(r"[ \t]*")
_ENTRY = "\u27e6specrag-dt\u27e7"
_ENTRY_LINE = re.compile(r"^(.*?)" + _ENTRY, re.M)
_BLANK = "\u27e6specrag-blank\u27e7"  # a line of its own where a blank line must survive rendering
_CODE_BREAK = "\u27e6specrag-br\u27e7"  # where an example in a list item starts and ends
_CODE_LINE = re.compile("[ \t]*" + _CODE_BREAK + "[ \t]*")
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
_BLANKS_IN_A_ROW = re.compile(_BLANK + r"(?:\s*" + _BLANK + ")+")  # two blocks' breaks in a row: one break
_RUN_OF_BLANKS = re.compile(r"(?:\n[ \t]*)*\n" + _BLANK + r"(?:[ \t]*\n)*|\n{3,}")


def reader_revision(kind: str) -> int:
    own = READER_REVISIONS.get(kind, 1)
    return 100 * READER_REVISIONS["html"] + own if kind == "man" else own  # man pages go through the HTML reader


@dataclass(frozen=True)
class Section:
    """A run of body text under one heading trail ("Parent > Child"; "" before any heading)."""

    heading: str
    start: int
    end: int
    page: int | None = None


@dataclass(frozen=True)
class Entry:
    """A definition-list entry (a man page's option or command): its term, and where the entry's
    text starts (the term's line), where its description starts (None when not located) and where
    it ends (its description's last character)."""

    term: str
    start: int
    end: int
    body: int | None = None


@dataclass(frozen=True)
class Document:
    source: str
    title: str
    text: str
    sections: tuple[Section, ...]
    kind: str
    entries: tuple[Entry, ...] = ()

    def section_text(self, section: Section) -> str:
        return self.text[section.start : section.end]


def kind_of(path: Path) -> str | None:
    """The loader kind for a file name, or None when the extension is not supported. A gzip-compressed
    file (`guide.md.gz`, as Debian ships most of /usr/share/doc) has the kind of the name inside; a name
    ending in a man page's section (`mount.8`, `ssl.1ssl`) is a man page's, its content checked on reading."""
    inner = _inner(path)
    return KINDS.get(inner.suffix.lower()) or ("man" if is_man_page_name(inner) else None)


def _inner(path: Path) -> Path:
    """The name a compressed file holds (`guide.md.gz` -> `guide.md`), else `path` itself."""
    return path.with_suffix("") if path.suffix.lower() == GZIP_SUFFIX else path


def load_document(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Document:
    """Read one file; raise SkipFile(reason) if it is unsupported, empty, huge, binary or broken."""
    inner, kind = _inner(path), kind_of(path)
    if kind is None:
        shown = inner.suffix + (path.suffix if inner != path else "")  # `.png.gz`, `.gz` for `changelog.gz`
        raise SkipFile(f"unsupported file type {shown or '(no extension)'!r}")
    data = read_bytes(path, max_bytes)
    if inner != path:
        data = gunzip(data, max_bytes)
    # the reader names the page after the inner file; its source stays the file on disk
    doc = replace(READERS[kind](inner, data), source=str(path))
    if not doc.text.strip():
        raise SkipFile("no text content")
    return doc


def gunzip(data: bytes, max_bytes: int) -> bytes:
    """A gzip file's content, at most `max_bytes` of it unpacked: a larger one is skipped, not inflated
    (a few KB of gzip can unpack to gigabytes)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as unpacking:
            content = unpacking.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as err:
        raise SkipFile(f"not a readable gzip file ({err})") from err
    if len(content) > max_bytes:
        raise SkipFile(f"too large unpacked (over {max_bytes / 2**20:.1f} MiB, the limit)")
    if not content:
        raise SkipFile("empty file")
    return content


def read_bytes(path: Path, max_bytes: int) -> bytes:
    try:
        size = path.stat().st_size
        if size == 0:
            raise SkipFile("empty file")
        if size > max_bytes:
            raise SkipFile(too_large(size, max_bytes))
        return path.read_bytes()
    except OSError as err:
        raise SkipFile(f"unreadable ({err.strerror or err})") from err


def too_large(size: int, max_bytes: int) -> str:
    return f"too large ({size / 2**20:.1f} MiB; the limit is {max_bytes / 2**20:.1f} MiB)"


def decode_text(data: bytes) -> str:
    """Strict UTF-8 (a BOM is allowed): binary or wrongly encoded files are skipped, not guessed."""
    if b"\0" in data[:SNIFF_BYTES]:
        raise SkipFile("binary content (NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SkipFile(f"not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})") from err


# --- sections from a list of headings --------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    start: int  # where the heading line starts
    body_start: int  # where the text under it starts


def sections_from_headings(text: str, headings: Iterable[Heading], title: str, start: int = 0) -> tuple[Section, ...]:
    """Cut text at headings; each section is named by its heading trail, minus the document title.

    Text before `start` (a page's front matter) belongs to no section."""
    sections, trail = [], HeadingTrail(title)
    for head in headings:
        sections.append(Section(trail.name, start, head.start))
        trail.enter(head.level, head.title)
        start = head.body_start
    sections.append(Section(trail.name, start, len(text)))
    return tuple(s for s in sections if text[s.start : s.end].strip())


class HeadingTrail:
    """The headings a point of a document lies under, as its section is named: "Parent > Child", without
    the document's title."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._heads: list[tuple[int, str]] = []

    def enter(self, level: int, heading: str) -> None:
        """A heading of `level` starts: it ends the ones at its level or deeper."""
        self._heads = [head for head in self._heads if head[0] < level] + [(level, heading)]

    @property
    def name(self) -> str:
        return " > ".join(heading for _, heading in self._heads if heading and heading != self.title)


def line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _NEWLINE.finditer(text)] + [len(text)]


# --- readers -----------------------------------------------------------------------------------


def read_text(path: Path, data: bytes) -> Document:
    text = decode_text(data)
    return Document(str(path), path.stem, text, (Section("", 0, len(text)),), "text")


def read_markdown(path: Path, data: bytes) -> Document:
    """Sections from CommonMark headings. Front matter (YAML between `---` lines: Jekyll, Docusaurus,
    MkDocs, Hugo; TOML between `+++` lines: Hugo) is left out of the text, and its `title` names the
    page; without one the first H1 does. A page that only opens with a rule (`---`) keeps its text:
    front matter must be a mapping."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.front_matter import front_matter_plugin

    text = decode_text(data)
    tokens = MarkdownIt("commonmark").use(front_matter_plugin).parse(text)
    lines = line_starts(text)
    body, meta = 0, None
    if tokens and tokens[0].type == "front_matter" and tokens[0].map:
        meta = front_matter(tokens[0].content, "yaml")
        if meta is None:
            tokens = MarkdownIt("commonmark").parse(text)
        else:
            body = lines[tokens[0].map[1]]
    elif toml := _TOML_FRONT_MATTER.match(text):
        meta = front_matter(toml.group(1), "toml")
        body = toml.end() if meta is not None else 0
    headings = [
        Heading(int(tok.tag[1:]), _heading_text(tokens[i + 1]), lines[tok.map[0]], lines[tok.map[1]])
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.map and lines[tok.map[0]] >= body  # a TOML `# comment` is none
    ]
    title = (meta or {}).get("title")
    named = _one_line(title) if isinstance(title, str) else ""
    title = named or next((h.title for h in headings if h.level == 1 and h.title), path.stem)
    return Document(str(path), title, text, sections_from_headings(text, headings, title, body), "markdown")


def _heading_text(inline: Token) -> str:
    """A heading as a reader sees it: its words and `code`, without inline HTML (`<a id="anchor"></a>`,
    which Icinga's and many GitHub-hosted manuals put in every heading) or emphasis and link marks."""
    parts = []
    for child in inline.children or ():
        if child.type == "html_inline" or child.type.endswith(("_open", "_close")):
            continue
        if child.type == "code_inline":
            parts.append(child.markup + child.content + child.markup)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        else:  # text, an escaped character, an image's alt text
            parts.append(child.content)
    return re.sub(r"\s+", " ", "".join(parts)).strip()


_TOML_FRONT_MATTER = re.compile(r"\+\+\+[ \t]*\r?\n(.*?)^\+\+\+[ \t]*(?:\r?\n|\Z)", re.S | re.M)


def front_matter(block: str, language: str) -> dict | None:
    """A front matter block's fields, or None when it is not a mapping in `language` (yaml or toml)."""
    import tomllib

    import yaml

    try:
        fields = yaml.safe_load(block) if language == "yaml" else tomllib.loads(block)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, RecursionError):  # not front matter: read as text
        return None
    return fields if isinstance(fields, dict) else None


def read_rst(path: Path, data: bytes) -> Document:
    """reStructuredText (Sphinx sources): sections from its titles, which docutils finds however they are
    adorned. The raw text is kept, as for Markdown. The page's name is its `:title:` field, else its
    document title (a lone top-level section, docutils' rule), else the file name."""
    text = decode_text(data)
    named, headings = _rst_outline(text)
    title = named or path.stem
    return Document(str(path), title, text, sections_from_headings(text, headings, title), "rst")


# Parse only: no file or URL inclusion (`include`, `raw`, `csv-table :file:`), no messages. Sphinx's own
# directives and roles are unknown to docutils; they become error nodes and the titles around them stand.
_RST_SETTINGS = {
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "report_level": 5,
    "halt_level": 5,
    "doctitle_xform": False,  # every title stays a section: sections_from_headings leaves the page's out
    "sectsubtitle_xform": False,
}
_RST_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1+[ \t]*")


def _rst_outline(text: str) -> tuple[str | None, list[Heading]]:
    """The page's title, if it has one, and each section title with its nesting level, located by the
    line docutils reports: its underline."""
    import docutils.core
    import docutils.nodes as nodes

    try:
        settings = {**_RST_SETTINGS, "warning_stream": io.StringIO()}
        tree = docutils.core.publish_doctree(text, settings_overrides=settings)
    except Exception:  # docutils gives up on some malformed input; the page is then one section
        return None, []
    raw, lines = _NEWLINE.split(text), line_starts(text)
    headings = []
    for section in tree.findall(nodes.section):
        under = (section[0].line or 0) - 1  # 0-based line of the underline
        if not (1 <= under < len(raw)) or not _RST_ADORNMENT.fullmatch(raw[under]):
            continue  # docutils' line numbers do not match ours (an exotic line break): leave this one out
        top = under - 1
        if top >= 1 and _RST_ADORNMENT.fullmatch(raw[top - 1]) and raw[top - 1][0] == raw[under][0]:
            top -= 1  # an overline above the title
        headings.append(Heading(_depth(section), _one_line(section[0].astext()), lines[top], lines[under + 1]))
    return _rst_title(tree), headings


def _rst_title(tree) -> str | None:
    """A `:title:` field opening the page, else the title of its only top-level section when nothing but
    comments, targets and fields comes before it (what docutils would make the document title)."""
    import docutils.nodes as nodes

    preamble = (nodes.comment, nodes.target, nodes.substitution_definition, nodes.system_message)
    opening = list(takewhile(lambda child: isinstance(child, (*preamble, nodes.field_list, nodes.docinfo)), tree))
    for fields in opening:
        for field in fields.findall(nodes.field) if isinstance(fields, (nodes.field_list, nodes.docinfo)) else ():
            if field[0].astext().strip().lower() == "title" and _one_line(field[1].astext()):
                return _one_line(field[1].astext())
    tops = [child for child in tree.children if isinstance(child, nodes.section)]
    lone = len(tops) == 1 and len(opening) == tree.index(tops[0])
    return _one_line(tops[0][0].astext()) or None if lone else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _depth(node) -> int:
    import docutils.nodes

    depth = 0
    while node is not None:
        depth += isinstance(node, docutils.nodes.section)
        node = node.parent
    return depth


def read_html(path: Path, data: bytes) -> Document:
    """Main text only (trafilatura drops scripts, styles, navigation); headings become sections."""
    if b"\0" in data[:SNIFF_BYTES]:
        raise SkipFile("binary content (NUL bytes)")
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    extracted, unrecovered = _extract(data)
    if not extracted or not (extracted.text or "").strip():
        raise SkipFile("no main text found in the HTML")
    text, headings, entries = _render_with_headings(extracted.body)
    title = next((h.title for h in headings if h.level == 1), None)
    if unrecovered is not None:  # its recovered headings are chapters ("Summary"): titled by the first reading
        title, extracted = _first_h1(unrecovered), unrecovered
    title = title or (extracted.title or "").strip() or path.stem
    return Document(str(path), title, text, sections_from_headings(text, headings, title), "html", entries)


def _extract(data: bytes) -> tuple[TrafilaturaDocument | None, TrafilaturaDocument | None]:
    """trafilatura's main text, favouring recall, with the page's headings; and the first reading,
    where the headings had to be recovered.

    trafilatura drops a heading that stands between sibling blocks (`<div>...</div><h1>4.
    Stopping</h1><div>...`): HAProxy's manuals kept none of their 150 headings, so no chunk said
    which chapter it came from. Where it keeps fewer than half of a page's headings, the page is
    read again with every heading turned into a marked paragraph, which it keeps, and the marks
    are turned back into headings. Elsewhere (the Slurm pages keep theirs) nothing changes.
    """
    tree = _tree_with_pre_as_code(data)
    if tree is None:
        return None, None
    headings = sum(1 for _ in tree.iter(*_HEADINGS))
    extracted = _extraction(tree)
    if extracted and 2 * _heads(extracted) < headings:
        tree = _tree_with_pre_as_code(data)  # trafilatura prunes the tree it reads
        for heading in list(tree.iter(*_HEADINGS)):
            text = " ".join(heading.text_content().split())
            heading.clear(keep_tail=True)  # attributes too: its class must not get the paragraph dropped
            heading.tag, heading.text = "p", f"\u27e6specrag-level-{heading.tag}\u27e7{text}"
        marked = _extraction(tree)
        if marked and len(marked.text or "") >= 0.97 * len(extracted.text or ""):
            for element in marked.body.iter():
                level = _HEADING_MARK.match(element.text or "")
                if level and element.tag == "p":  # kept as a paragraph: a heading again
                    element.tag = "head"
                    element.set("rend", level.group(1))
                element.text = _HEADING_MARK.sub("", element.text or "") or None  # kept as anything else: as kept
                element.tail = _HEADING_MARK.sub("", element.tail or "") or None
            return marked, extracted
    return extracted, None


_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_HEADING_MARK = re.compile("\u27e6specrag-level-(h[1-6])\u27e7")  # not a `_MARK`


def _extraction(tree: HtmlElement) -> TrafilaturaDocument | None:
    import trafilatura

    return trafilatura.bare_extraction(
        tree, favor_recall=True, include_comments=False, include_tables=True, with_metadata=True
    )


def _first_h1(extracted: TrafilaturaDocument) -> str | None:
    heads = (head for head in extracted.body.iter("head") if head.get("rend") == "h1")
    return next((" ".join("".join(head.itertext()).split()) for head in heads), None)


def _heads(extracted: TrafilaturaDocument) -> int:
    return sum(1 for _ in extracted.body.iter("head"))


_INLINE_TAGS = ("b", "i", "u", "em", "strong", "font", "span", "a", "tt", "kbd", "samp", "var")


def _tree_with_pre_as_code(data: bytes) -> HtmlElement | None:
    """The page parsed as trafilatura parses it, every <pre> block made <pre><code> with its inline
    markup dropped, so trafilatura keeps its lines (None when the bytes are not HTML); headings
    and terms freed from layouts it drops (`_keep_headings_and_terms`).

    trafilatura turns a <pre> without a <code> inside into a quote and collapses its
    whitespace: man2html pages (every Slurm man page: `<PRE><B>$ salloc ...</B></PRE>`) lost
    the line breaks of their examples, so command, output and the next command ran together
    on one line, and the model copied them that way. The tree goes to trafilatura as it is,
    so the page is decoded and parsed once.
    """
    from lxml import etree
    from trafilatura.utils import load_html

    tree = load_html(data)
    if tree is not None:
        _keep_headings_and_terms(tree)
    for pre in tree.iter("pre") if tree is not None else ():
        if pre.find(".//code") is None:
            etree.strip_tags(pre, *_INLINE_TAGS)
            code = etree.Element("code")
            code.text, pre.text = pre.text, None
            code.extend(list(pre))  # anything left (<br>...) moves inside too
            pre.append(code)
        if next(pre.iterancestors("dd", "li"), None) is not None:
            # trafilatura joins a list item's blocks with spaces: an option's example ran into its prose
            code = pre.find(".//code")
            if not (code.text or "").lstrip(" \t").startswith("\n"):  # else it starts a line already
                code.text = _CODE_BREAK + (code.text or "")
            _append_to_last_text(code, _CODE_BREAK, before_space=True)
    return tree


def _keep_headings_and_terms(tree: HtmlElement) -> None:
    """Undo three page layouts that trafilatura's boilerplate filter mistakes for navigation.

    HAProxy's manuals (and other Bootstrap-styled generated docs) lost every chapter heading and
    the name of every command and keyword they describe, leaving descriptions that never say
    what they describe:
    - an empty named anchor (`<a name="disable server"></a>disable server`) is removed with the
      text that follows it: it is unwrapped, the text kept;
    - a term written as a link to itself (`<a href="#disable%20server">disable server</a>`) is all
      link, so it is dropped as a menu: a link whose target starts where the link stands (no
      word between them, or the target holds the link) becomes plain text. A table of contents
      links far away, and stays a menu;
    - a heading in a wrapper of its own (`<div class="page-header"><h1>4. Stopping</h1></div>`)
      is dropped with the wrapper, whose class reads as a page header: the wrapper is unwrapped.
    A permalink mark inside what it links to (Apache's `<h2 id="x">Listen Directive <a href="#x">¶</a>`)
    is removed, so a heading does not end in "¶".
    """
    from urllib.parse import unquote

    offsets, targets, words = {}, {}, 0
    for event, element in _walk(tree):
        if event == "start":
            offsets[element] = words
            words += len((element.text or "").split())
            for name in filter(None, (element.get("id"), element.get("name"))):
                targets.setdefault(name, []).append(element)  # a name can stand before each of several entries
        else:
            words += len((element.tail or "").split())
    for link in list(tree.iter("a")):
        href = link.get("href")
        if href is None and not link.text_content().strip():
            link.drop_tag()  # an empty anchor: its tail (the term) stays
        elif href and href.startswith("#"):
            ancestors = set(link.iterancestors())
            here = [t for t in targets.get(unquote(href[1:]), ()) if offsets[t] == offsets[link] or t in ancestors]
            if here and any(c.isalnum() for c in link.text_content()):
                link.drop_tag()
            elif any(t in ancestors for t in here):
                link.drop_tree()  # a permalink mark (¶, #) in what it links to: not text; its tail stays
    for heading in list(tree.iter(*_HEADINGS)):
        text, wrapper = heading.text_content().strip(), heading.getparent()
        while text and wrapper is not None and wrapper.tag in _WRAPPERS and wrapper.text_content().strip() == text:
            outer = wrapper.getparent()
            if outer is None:
                break
            wrapper.drop_tag()
            wrapper = outer


_WRAPPERS = ("div", "header", "section", "hgroup")


def _walk(tree: HtmlElement) -> Iterable[tuple[str, HtmlElement]]:
    """(event, element) for the start and end of every element, in document order (no comments)."""
    from lxml import etree

    return ((event, el) for event, el in etree.iterwalk(tree, events=("start", "end")) if isinstance(el.tag, str))


def _render_with_headings(body) -> tuple[str, list[Heading], tuple[Entry, ...]]:
    """Render trafilatura's XML to plain text, noting where each <head> and definition-list entry landed.

    Each heading gets a unique marker before rendering; the markers' positions in the rendered
    text are the heading offsets, then the markers are removed.
    """
    unmarked = deepcopy(body)
    heads = list(body.iter("head"))
    for i, head in enumerate(heads):
        head.text = f"\u27e6specrag-h{i}\u27e7{head.text or ''}"
    marked = _render(body)
    text = _MARK.sub("", marked)
    headings, removed = [], 0
    for match in _MARK.finditer(marked):
        start = match.start() - removed
        removed += len(match.group())
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        title = " ".join(text[start:line_end].split())
        if title:
            level = _level(heads[int(match.group(1))].get("rend"))
            headings.append(Heading(level, title, start, min(line_end + 1, len(text))))
    return text, headings, _entries(unmarked, text)


def _render(body) -> str:
    from trafilatura.xml import xmltotxt

    _mark_entries(body)
    _mark_code_paragraphs(body)
    marked = _ENTRY_LINE.sub(lambda m: "\n" + m.group(1), xmltotxt(body, include_formatting=False))
    marked = _BLANKS_IN_A_ROW.sub(_BLANK, _CODE_LINE.sub(_code_line_break, marked))
    return _RUN_OF_BLANKS.sub("\n\n", marked).removeprefix(_BLANK + "\n")


def _code_line_break(mark: re.Match) -> str:
    """A line break where an example in a list item starts or ends (`_tree_with_pre_as_code`), unless
    the example already starts its line (first in its item) or ends it."""
    text, start, end = mark.string, mark.start(), mark.end()
    line_so_far = text[text.rfind("\n", 0, start) + 1 : start]
    at_start = not line_so_far.strip() or line_so_far.strip() == "-"  # "- " opens a rendered item
    kept = mark.group().replace(_CODE_BREAK, "")
    return kept if at_start or end == len(text) or text[end] == "\n" else "\n"


def _entries(body, text: str) -> tuple[Entry, ...]:
    """The definition-list entries of `text`, the rendering of `body`.

    `body` is rendered again with a mark at each entry's first term and after its last
    description. A mark can move a line break (trafilatura breaks lines by what an element's text
    holds), so each is placed in `text` by the number of non-space characters before it.
    """
    terms = _mark_entry_spans(body)
    if not terms:  # no definition list: no second rendering
        return ()
    marked = _render(body)
    if "".join(_SPAN_MARK.sub("", marked).split()) != "".join(text.split()):
        return ()
    starts, bodies, ends = {}, {}, {}
    letters, cursor, count, place = _NON_SPACE.finditer(text), 0, 0, len(text)
    for match in _SPAN_MARK.finditer(marked):
        wanted = count + len("".join(marked[cursor : match.start()].split()))
        while count < wanted:  # `place` ends up just after the wanted-th non-space character of text
            place, count = next(letters).end(), count + 1
        cursor = match.end()
        number = int(match.group(2))
        if match.group(1) in "td":  # the line from its list mark, where a chunk holding it starts
            following = _NON_SPACE.search(text, place if count else 0)
            line = text.rfind("\n", 0, following.start() if following else len(text)) + 1
            (starts if match.group(1) == "t" else bodies)[number] = _INDENT.match(text, line).end()
        else:
            ends[number] = place if count else 0
    entries = (
        Entry(term, starts[i], ends[i], bodies.get(i)) for i, term in enumerate(terms) if i in starts and i in ends
    )
    return tuple(sorted((e for e in entries if e.start < e.end), key=lambda e: e.start))


def _mark_entries(body) -> None:
    """Mark each definition-list entry that follows another one, for a blank line before it.

    Man pages are definition lists (an option or parameter, then what it does), which
    trafilatura renders as list items, term and description alike. With no blank line between
    entries, the chunker's first choice of a cut (a paragraph break) never fell between two of
    them, and a chunk could end on a bare term (`- TimeLimit=<time>`) whose description opened
    the next chunk: neither chunk then read as the answer to "change a job's time limit". A blank
    line before each entry lets chunks cut between entries and keep a term with its description.
    """
    for item in body.iter("item"):
        previous = item.getprevious()
        if _is_term(item) and previous is not None and not _is_term(previous):
            item.text = _ENTRY + (item.text or "")


def _mark_entry_spans(body) -> list[str]:
    """Mark where each definition-list entry starts (its first term), where its description starts and
    where it ends (its last description);
    return the entries' terms ("-A, --account=<account>"; several terms of one entry joined by ", ")."""
    terms: list[str] = []
    for parent in dict.fromkeys(item.getparent() for item in body.iter("item") if _is_term(item)):
        items = list(parent.iterchildren("item"))
        for i, item in enumerate(items):
            if not _is_term(item) or (i and _is_term(items[i - 1])):
                continue
            run = list(takewhile(_is_term, items[i:]))
            descriptions = list(takewhile(lambda it: not _is_term(it), items[i + len(run) :]))
            term = ", ".join(" ".join("".join(t.itertext()).split()) for t in run)
            if not descriptions or not term:
                continue
            number = len(terms)
            terms.append(term if len(term) <= MAX_TERM_CHARS else term[: MAX_TERM_CHARS - 1] + "\u2026")
            run[0].text = f"\u27e6specrag-t{number}\u27e7{run[0].text or ''}"
            # at the description's first text: a mark in an empty item (`<dd><p>...`) would render its list mark
            first = next((el for el in descriptions[0].iter() if (el.text or "").strip()), None)
            if first is not None and not any(  # not in a nested entry's term: that is the nested entry's own
                _is_term(item) for item in (first, *first.iterancestors("item")) if item.tag == "item"
            ):
                first.text = f"\u27e6specrag-d{number}\u27e7{first.text}"
            _append_to_last_text(descriptions[-1], f"\u27e6specrag-u{number}\u27e7", before_space=True)
    return terms


def _mark_code_paragraphs(body) -> None:
    """Mark the blank lines of preformatted blocks, and one after each block, to survive rendering.

    trafilatura's text drops every blank line. Manuals written as preformatted text (HAProxy's
    are all `<pre>`: a command's name, then its description in paragraphs) came out as one run
    of lines, so the chunker, whose first choice of a cut is a paragraph break, cut anywhere: a
    command's description began one chunk and ended the next, away from its name. With the
    paragraphs kept and a break after each block, chunks end where an entry or paragraph ends.

    Only a page whose preformatted blocks hold at least half its text is read so: on pages of
    prose with examples (nearly every Slurm page) a break after each example gave shorter chunks
    and a lower MRR on all six Slurm question sets (own 0.794 -> 0.789, unseen 0.617 -> 0.577).
    """
    blocks = [code for code in body.iter("code") if "\n" in "".join(code.itertext())]  # not inline code
    outermost = [code for code in blocks if code.getparent() is None or code.getparent().tag != "code"]
    if 2 * sum(len("".join(code.itertext())) for code in outermost) < len("".join(body.itertext())):
        return
    for code in outermost:
        for element in code.iter():
            if element.text:
                element.text = _BLANK_LINES.sub(f"\n{_BLANK}\n", element.text)
            if element.tail and element is not code:
                element.tail = _BLANK_LINES.sub(f"\n{_BLANK}\n", element.tail)
        _append_to_last_text(code, f"\n{_BLANK}")


def _append_to_last_text(element, text: str, before_space: bool = False) -> None:
    """Add text after the last character of element's content (not its tail), in place of its
    last line breaks, or, with `before_space`, before its trailing white space."""
    while len(element) and not element[-1].tail:
        element = element[-1]
    holder, field = (element[-1], "tail") if len(element) else (element, "text")
    content = getattr(holder, field) or ""
    if before_space:
        body = content.rstrip()
        setattr(holder, field, body + text + content[len(body) :])
    else:
        setattr(holder, field, content.rstrip("\n") + text)


def _is_term(item) -> bool:
    return (item.get("rend") or "").startswith("dt")


def _level(rend: str | None) -> int:
    return int(rend[1]) if rend and re.fullmatch(r"h[1-6]", rend) else 2


def read_man(path: Path, data: bytes) -> Document:
    """A man page's troff source, as pandoc writes it in HTML (man_pages.py), read as an HTML page."""
    page = man_page_html(path, decode_text(data))
    return replace(read_html(path, page.encode()), kind="man")


def read_pdf(path: Path, data: bytes) -> Document:
    """One section per page; the page number is kept in each section. Where the PDF has bookmarks (a
    manual's outline), a page's section is named by the trail of the latest ones that start on or
    before it, so its chunks carry "Chapter > Section" as other formats' do."""
    if b"%PDF-" not in data[:1024]:
        raise SkipFile("not a PDF file (no %PDF- header)")
    pages, meta_title, outline = _pdf_pages(data)
    pages = without_running_heads(pages)
    title = meta_title or path.stem
    sections, parts, offset, trail = [], [], 0, HeadingTrail(title)
    marks = iter(sorted(outline, key=lambda mark: mark[0]))
    mark = next(marks, None)
    for number, page_text in enumerate(pages, start=1):
        while mark is not None and mark[0] < number:  # bookmarks on this page or before it
            trail.enter(mark[1], mark[2])
            mark = next(marks, None)
        if page_text.strip():
            sections.append(Section(trail.name, offset, offset + len(page_text), page=number))
            parts.append(page_text)
            offset += len(page_text) + 2
    return Document(str(path), title, "\n\n".join(parts), tuple(sections), "pdf")


RUNNING_HEAD_PAGES = 3  # a first or last line on this many pages or more, numbers aside, is a running head or foot
_PAGE_NUMBER = re.compile(r"[-–—\s]*(?:page\s*)?(?:\d+|[ivxlcdm]+)(?:\s*(?:of|/)\s*\d+)?[-–—\s]*", re.I)
_LETTERS = re.compile(r"[^a-z]+")


def without_running_heads(pages: list[str]) -> list[str]:
    """The pages without the running heads and feet a printed manual repeats: a page's first or last line
    that, with its numbers left out, is the first (or last) line of `RUNNING_HEAD_PAGES` pages or more
    ("6 CHAPTER 1. BACULA CONSOLE", "1.5. ALPHABETIC LIST OF CONSOLE COMMANDS 7"), or a page number alone.
    pypdf reads them as text, so they stood in the middle of a chunk, once between a command's two lines."""

    def key(line: str) -> str:
        words = _LETTERS.sub("", line.lower())
        return words or ("#page" if _PAGE_NUMBER.fullmatch(line) else "")

    split = [page.split("\n") for page in pages]
    ends = []  # per page: its first and last lines that hold anything, each (index, key); None for a blank page
    for lines in split:
        filled = [i for i, line in enumerate(lines) if line.strip()]
        ends.append(tuple((i, key(lines[i])) for i in (filled[0], filled[-1])) if filled else None)
    heads = Counter(first[1] for first, _ in filter(None, ends))
    feet = Counter(last[1] for _, last in filter(None, ends))
    kept = []
    for lines, found in zip(split, ends, strict=True):
        drop = set()
        if found:
            (first, head), (last, foot) = found
            if head and heads[head] >= RUNNING_HEAD_PAGES:
                drop.add(first)
            if last != first and foot and feet[foot] >= RUNNING_HEAD_PAGES:
                drop.add(last)
        kept.append("\n".join(line for i, line in enumerate(lines) if i not in drop))
    return kept


def _pdf_outline(reader) -> list[tuple[int, int, str]]:
    """(0-based page, nesting level, title) of each bookmark in outline order; a broken one is left out."""
    marks: list[tuple[int, int, str]] = []

    def walk(items: list, level: int) -> None:
        for item in items:
            if isinstance(item, list):  # the children of the item before it
                walk(item, level + 1)
                continue
            with contextlib.suppress(Exception):  # pypdf raises many types on damaged destinations
                page = reader.get_destination_page_number(item)
                if page is not None and page >= 0 and _one_line(str(item.title or "")):
                    marks.append((page, level, _one_line(str(item.title))))

    with contextlib.suppress(Exception):
        walk(reader.outline, 1)
    return marks


def read_docx(path: Path, data: bytes) -> Document:
    """A Word document's paragraphs and tables in their order (python-docx). Paragraphs styled Title or
    Heading n are headings: the first Title or Heading 1 names the page, else the document's title
    property. A list item gets a `- `; a table row becomes its cells joined by ` | `."""
    import zipfile

    import docx

    try:
        unpacked = sum(member.file_size for member in zipfile.ZipFile(io.BytesIO(data)).infolist())
        if unpacked > DOCX_MAX_UNPACKED:
            raise SkipFile(f"unpacks to {unpacked / 2**20:.0f} MiB (the limit is {DOCX_MAX_UNPACKED / 2**20:.0f} MiB)")
        word = docx.Document(io.BytesIO(data))
        parts, headings = _docx_blocks(word)
        core_title = (word.core_properties.title or "").strip()
    except SkipFile:
        raise
    except Exception as err:  # python-docx raises many types on a damaged file or one that is no .docx
        raise SkipFile(f"broken Word document ({type(err).__name__}: {err})") from err
    text = "\n\n".join(parts)
    title = next((h.title for h in headings if h.level <= 1), "") or core_title or path.stem
    return Document(str(path), title, text, sections_from_headings(text, headings, title), "docx")


def _docx_blocks(word) -> tuple[list[str], list[Heading]]:
    """The text of each non-empty paragraph and table, and the headings among them (offsets into the
    blocks joined by blank lines)."""
    from docx.table import Table

    parts, headings, offset = [], [], 0
    for block in word.iter_inner_content():
        level = None
        if isinstance(block, Table):
            rows = [list(dict.fromkeys(_one_line(cell.text) for cell in row.cells)) for row in block.rows]
            text = "\n".join(" | ".join(cells) for cells in rows)  # a merged cell is listed once
        else:
            style = block.style.name if block.style is not None else ""
            level = 0 if style == "Title" else _heading_level(style)
            text = f"- {block.text}" if style.startswith("List") and level is None else block.text
        if not text.strip():
            continue
        if level is not None:
            headings.append(Heading(level, _one_line(text), offset, offset + len(text) + 2))
        parts.append(text)
        offset += len(text) + 2
    return parts, headings


def _heading_level(style: str) -> int | None:
    """n for Word's built-in `Heading n` styles, else None."""
    match = re.fullmatch(r"Heading (\d)", style)
    return int(match.group(1)) if match else None


def _pdf_pages(data: bytes) -> tuple[list[str], str, list[tuple[int, int, str]]]:
    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise SkipFile("encrypted PDF")
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata else None
        outline = _pdf_outline(reader)
    except SkipFile:
        raise
    except Exception as err:  # pypdf raises many types on damaged files; all mean "skip it"
        raise SkipFile(f"broken PDF ({type(err).__name__}: {err})") from err
    if not any(p.strip() for p in pages):
        raise SkipFile("PDF has no extractable text (scanned images?)")
    return pages, (meta_title or "").strip() if isinstance(meta_title, str) else "", outline


READERS: dict[str, Callable[[Path, bytes], Document]] = {
    "text": read_text,
    "markdown": read_markdown,
    "rst": read_rst,
    "html": read_html,
    "pdf": read_pdf,
    "docx": read_docx,
    "man": read_man,
}
