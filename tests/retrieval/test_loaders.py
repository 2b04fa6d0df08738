from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from retrieval.errors import SkipFile
from retrieval.loaders import kind_of, load_document, without_running_heads

FIXTURES = Path(__file__).parent / "fixtures" / "docs"


def headings(doc) -> list[str]:
    return [s.heading for s in doc.sections]


def test_markdown_sections_follow_headings_and_ignore_hashes_in_code():
    doc = load_document(FIXTURES / "runbook-slurmctld.md")
    assert doc.kind == "markdown"
    assert doc.title == "Restarting slurmctld"
    assert headings(doc) == ["", "Before you restart", "Restart procedure", "Restart procedure > Verify"]
    before = doc.section_text(doc.sections[1])
    assert "# this comment is code, not a heading" in before
    assert "Restart procedure" not in before  # the next heading starts a new section


def test_markdown_offsets_point_into_the_raw_file():
    raw = (FIXTURES / "runbook-slurmctld.md").read_text(encoding="utf-8")
    doc = load_document(FIXTURES / "runbook-slurmctld.md")
    assert doc.text == raw
    verify = doc.sections[-1]
    assert raw[verify.start : verify.end].strip().startswith("Run `sinfo`")


def test_markdown_without_h1_is_titled_by_file_stem(tmp_path):
    path = tmp_path / "notes-on-fairshare.md"
    path.write_text("## Decay\n\nPriorityDecayHalfLife halves old usage.\n", encoding="utf-8")
    doc = load_document(path)
    assert doc.title == "notes-on-fairshare"
    assert headings(doc) == ["Decay"]


def test_markdown_headings_lose_inline_html_and_emphasis_marks_but_keep_code(tmp_path):
    # Icinga's manual puts an anchor in each of its 1,277 headings: it named every page and section
    path = tmp_path / "11-cli-commands.md"
    path.write_text(
        '# Icinga 2 CLI Commands <a id="cli-commands"></a>\n\nIntro.\n\n'
        '## Validate with `icinga2 daemon -C` **first** <a id="config-validation"></a>\n\nRun it.\n\n'
        "### [Feature](features.md) and ![the logo](logo.png) list\n\nMore.\n",
        encoding="utf-8",
    )
    doc = load_document(path)
    assert doc.title == "Icinga 2 CLI Commands"
    assert headings(doc) == [
        "",
        "Validate with `icinga2 daemon -C` first",
        "Validate with `icinga2 daemon -C` first > Feature and the logo list",
    ]


def test_text_is_one_whole_document():
    txt = load_document(FIXTURES / "munge-keys.txt")
    assert txt.kind == "text" and len(txt.sections) == 1
    assert "munge -n | unmunge" in txt.section_text(txt.sections[0])


def test_rst_sections_follow_its_titles_and_the_first_names_the_page():
    rst = load_document(FIXTURES / "gpu-drain.rst")
    assert rst.kind == "rst" and rst.title == "Draining a GPU node"
    assert headings(rst) == ["", "Resuming"]
    assert "state=resume" in rst.section_text(rst.sections[1])
    assert "-----" not in rst.section_text(rst.sections[0])  # the underline goes with its title


def test_rst_nesting_follows_the_adornment_styles_in_order_of_appearance(tmp_path):
    path = tmp_path / "fts.rst"
    path.write_text(
        "======================\nRestarting the FTS agent\n======================\n\nIntro.\n\n"
        "Checking\n========\n\n.. code-block:: bash\n\n   systemctl status fts-server\n\n"
        "Logs\n----\n\nRead :ref:`the logs <logs>` first.\n\n"  # a Sphinx role docutils does not know
        "Restarting\n==========\n\nRun ``systemctl restart fts-server``.\n",
        encoding="utf-8",
    )
    doc = load_document(path)
    assert doc.title == "Restarting the FTS agent"  # over- and underlined: its own, outermost style
    assert headings(doc) == ["", "Checking", "Checking > Logs", "Restarting"]
    assert doc.section_text(doc.sections[1]).strip().endswith("systemctl status fts-server")
    assert doc.section_text(doc.sections[3]).strip() == "Run ``systemctl restart fts-server``."


def test_rst_page_is_named_by_its_title_field_else_a_lone_top_title_else_its_file(tmp_path):
    def title(name: str, text: str) -> str:
        (tmp_path / name).write_text(text, encoding="utf-8")
        return load_document(tmp_path / name).title

    sections = "Configuration Values\n====================\n\nText.\n\nExit codes\n==========\n\nMore.\n"
    assert title("s3.rst", ":title: AWS CLI S3 Configuration\n:category: S3\n\nIntro.\n\n" + sections) == (
        "AWS CLI S3 Configuration"
    )
    assert title("two.rst", sections) == "two"  # two top-level sections: neither is the page's title
    assert title("body.rst", "Intro.\n\n:title: not the page\n\n" + sections) == "body"  # a field in the text
    assert title("lone.rst", ".. _top:\n\nSquid proxies\n=============\n\nText.\n\nCache\n-----\n\nMore.\n") == (
        "Squid proxies"
    )


def test_rst_never_reads_other_files(tmp_path, monkeypatch):
    import docutils.io

    opened = []
    real = docutils.io.FileInput.__init__

    def spy(self, *args, **kwargs):
        opened.append(kwargs.get("source_path"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(docutils.io.FileInput, "__init__", spy)
    secret = tmp_path / "secret.txt"
    secret.write_text("the root password is hunter2\n", encoding="utf-8")
    path = tmp_path / "page.rst"
    path.write_text(f"Page\n====\n\n.. include:: {secret}\n\n.. raw:: html\n   :file: {secret}\n\nText.\n")
    doc = load_document(path)  # `.. include:: /dev/zero` in a page would hang the ingest
    assert doc.title == "Page" and opened == []


def test_rst_that_docutils_cannot_structure_is_still_one_document(tmp_path, monkeypatch):
    path = tmp_path / "odd.rst"
    path.write_text("Title\n=====\n\nText\n-----\n\nMore\n=====\n\n  Bad\n  ===\n", encoding="utf-8")
    doc = load_document(path)  # inconsistent title styles: docutils reports them, we read on
    assert doc.kind == "rst" and "More" in doc.text and doc.sections

    import docutils.core

    def gives_up(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")  # deeply nested input

    monkeypatch.setattr(docutils.core, "publish_doctree", gives_up)
    whole = load_document(path)
    assert (whole.title, headings(whole)) == ("odd", [""]) and whole.text == doc.text


def test_docx_headings_lists_and_tables_in_document_order(tmp_path):
    import docx

    word = docx.Document()
    word.core_properties.title = "a property nobody updated"
    word.add_heading("Restarting the GridFTP door", 0)  # the Title style
    word.add_paragraph("Use this page when transfers hang.")
    word.add_heading("Check the door", 1)
    word.add_paragraph("Run dcache status on se01.", style="List Bullet")
    table = word.add_table(rows=2, cols=2)
    for (row, col), text in {(0, 0): "Symptom", (0, 1): "Action", (1, 0): "hung", (1, 1): "restart"}.items():
        table.cell(row, col).text = text
    word.add_heading("Restart it", 2)
    word.add_paragraph("dcache restart gridftp-se01Domain")
    word.save(tmp_path / "door.docx")
    doc = load_document(tmp_path / "door.docx")
    assert (doc.kind, doc.title) == ("docx", "Restarting the GridFTP door")
    assert headings(doc) == ["", "Check the door", "Check the door > Restart it"]
    assert (
        doc.section_text(doc.sections[1]).strip() == "- Run dcache status on se01.\n\nSymptom | Action\nhung | restart"
    )
    assert doc.section_text(doc.sections[2]).strip() == "dcache restart gridftp-se01Domain"


def test_a_broken_or_inflating_docx_is_skipped(tmp_path, monkeypatch):
    import zipfile

    from retrieval import loaders

    (tmp_path / "notes.docx").write_bytes(b"PK\x03\x04 not really a zip")
    with zipfile.ZipFile(tmp_path / "other.docx", "w") as archive:
        archive.writestr("readme.txt", "a zip, but no Word document inside")
    with zipfile.ZipFile(tmp_path / "bomb.docx", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", "<w/>" + " " * 4096)
    monkeypatch.setattr(loaders, "DOCX_MAX_UNPACKED", 1024)
    for name, why in (("notes", "broken Word document"), ("other", "broken Word document"), ("bomb", "unpacks to")):
        with pytest.raises(SkipFile, match=why):
            load_document(tmp_path / f"{name}.docx")
    monkeypatch.undo()

    def damaged(word):
        raise AttributeError("'NoneType' object has no attribute 'name'")  # a part python-docx cannot walk

    import docx

    docx.Document().save(tmp_path / "walk.docx")
    monkeypatch.setattr(loaders, "_docx_blocks", damaged)
    with pytest.raises(SkipFile, match=r"broken Word document \(AttributeError"):
        load_document(tmp_path / "walk.docx")  # skipped with its reason, never an ingest-stopping error


@pytest.mark.parametrize(
    "opening, title",
    [
        ('---\ntitle: "Restarting the\n  GridFTP door"\ntags: [storage, dcache]\n---\n', "Restarting the GridFTP door"),
        (
            '+++\n# a TOML comment\ntitle = "Draining worker nodes"\n[params]\n  owner = "ops"\n+++\n',
            "Draining worker nodes",
        ),
    ],
)
def test_front_matter_in_yaml_or_hugos_toml_names_the_page_and_is_neither_text_nor_heading(tmp_path, opening, title):
    path = tmp_path / "page.md"
    path.write_text(opening + "\nUse this page when transfers fail.\n\n## Steps\n\nRun it.\n", encoding="utf-8")
    doc = load_document(path)
    assert doc.title == title and headings(doc) == ["", "Steps"]  # a TOML `# comment` is no heading
    assert doc.section_text(doc.sections[0]).strip() == "Use this page when transfers fail."


def test_toml_front_matter_that_does_not_parse_stays_text(tmp_path):
    path = tmp_path / "plus.md"
    path.write_text("+++\nnot = [toml\n+++\n\n# Real title\n\nBody.\n", encoding="utf-8")
    doc = load_document(path)
    assert doc.title == "Real title" and "not = [toml" in doc.section_text(doc.sections[0])


def test_markdown_opening_with_a_rule_keeps_its_text(tmp_path):
    path = tmp_path / "intro.md"
    path.write_text("---\nRead this first\n---\n\nIt matters.\n\n# Intro\n\nBody.\n", encoding="utf-8")
    doc = load_document(path)  # not a YAML mapping: a rule and a setext heading, as CommonMark reads it
    assert doc.title == "Intro"
    assert headings(doc) == ["", "Read this first", ""]
    assert doc.section_text(doc.sections[1]).strip() == "It matters."


def test_markdown_front_matter_without_a_title_falls_back_to_the_h1(tmp_path):
    path = tmp_path / "page.md"
    path.write_text("---\nweight: 3\n---\n# Squid proxies\n\nText.\n", encoding="utf-8")
    doc = load_document(path)
    assert doc.title == "Squid proxies" and "weight" not in doc.section_text(doc.sections[-1])


def test_html_keeps_main_text_and_headings_only():
    doc = load_document(FIXTURES / "html" / "backup.html")
    assert doc.title == "Database backups"
    assert headings(doc) == ["", "Restoring a backup", "Restoring a backup > Point in time recovery"]
    assert "mysqlbinlog" in doc.section_text(doc.sections[2])
    for noise in ("script-should-not-appear", "another-script-token", "secret-style-token", "Navigation link only"):
        assert noise not in doc.text


MAN2HTML_EXAMPLE = """<html><head><title>salloc</title></head><body><h1>salloc</h1><h2>OPTIONS</h2>
<DL COMPACT><DT><B>--mem-per-cpu</B>=&lt;size&gt;<DD>
<P>The allocated memory per cpu includes all threads, as this session on the café cluster shows:
<P>
<PRE>
<B>$ salloc -n3 --mem-per-cpu=100
salloc: Granted job allocation 17199
$ sacct -j $SLURM_JOB_ID -X -o jobid%7,reqtres%35
</B>  JobID    ReqTRES
  17199    billing=3,cpu=3,mem=300M,node=1
</PRE>
<P>In this second example the job asks for whole cores on the café cluster.
</DL>
<pre><code>srun --exclusive hostname
srun hostname</code></pre></body></html>"""


def test_html_code_examples_keep_their_lines_in_man2html_option_lists(tmp_path):
    path = tmp_path / "salloc.html"
    path.write_bytes(MAN2HTML_EXAMPLE.encode())  # UTF-8 without a charset: café must survive
    text = load_document(path).text
    assert "\n$ salloc -n3 --mem-per-cpu=100\nsalloc: Granted job allocation 17199\n$ sacct -j" in text
    assert "  17199    billing=3,cpu=3,mem=300M,node=1" in text  # columns of output stay aligned
    assert "srun --exclusive hostname\nsrun hostname" in text
    assert "café cluster shows" in text and "Ã" not in text


def test_html_without_h1_falls_back_to_the_page_title(tmp_path):
    path = tmp_path / "page.htm"
    body = "<p>" + "Partitions group nodes into logical sets for scheduling purposes. " * 6 + "</p>"
    path.write_text(f"<html><head><title>Partition guide</title></head><body><article>{body}</article></body></html>")
    doc = load_document(path)
    assert doc.title == "Partition guide"
    assert "logical sets" in doc.text


def test_pdf_bookmarks_name_the_sections_of_the_pages_they_start_on_and_after(tmp_path, pdf_maker):
    outline = [("Storage manual", 0, None), ("Pools", 1, 0), ("Draining a pool", 2, 1), ("Doors", 3, 0)]
    pages = ["Introduction", "Pools hold the data", "Run drain pool7", "Doors serve clients", "More on doors"]
    pdf = pdf_maker(tmp_path / "manual.pdf", pages, title="Storage manual", outline=outline)
    doc = load_document(pdf)
    assert headings(doc) == ["", "Pools", "Pools > Draining a pool", "Doors", "Doors"]
    assert [s.page for s in doc.sections] == [1, 2, 3, 4, 5]
    plain = load_document(pdf_maker(tmp_path / "plain.pdf", pages))
    assert headings(plain) == [""] * 5  # no bookmarks: pages only, as before


def test_pdf_running_heads_and_page_numbers_are_left_out_of_the_text(tmp_path, pdf_maker):
    # Bacula's console manual: "6 CHAPTER 1. BACULA CONSOLE" stood between the two lines of a command
    pages = [
        f"{n} CHAPTER 1. BACULA CONSOLE\ndelete volume=<name> pool=<pool> or\ndelete JobId=<id>\n{n}"
        if n % 2 == 0
        else f"1.5. LIST OF CONSOLE COMMANDS {n}\nThe list command shows catalog records.\nSee also llist.\n{n}"
        for n in range(2, 8)
    ]
    doc = load_document(pdf_maker(tmp_path / "console.pdf", pages))
    assert "CHAPTER" not in doc.text and "LIST OF CONSOLE COMMANDS" not in doc.text
    assert "delete volume=<name> pool=<pool> or\ndelete JobId=<id>" in doc.text
    assert doc.text.count("The list command shows catalog records.") == 3
    assert not re.search(r"(?m)^\s*\d+\s*$", doc.text)  # no page number left on a line of its own
    assert [s.page for s in doc.sections] == [1, 2, 3, 4, 5, 6]


def test_lines_repeated_on_fewer_pages_or_inside_a_page_stay():
    pages = ["Example:\nrun job=nightly\n}", "Example:\nlist volumes\n}", "status dir\nExample: again\n}"]
    assert without_running_heads(pages) == pages  # two pages open alike; "}" ends code, not a page number
    numbered = ["Intro text.\n1", "More text.\n2", "Last text.\n- 3 -"]
    assert without_running_heads(numbered) == ["Intro text.", "More text.", "Last text."]


def test_pdf_keeps_page_numbers_and_metadata_title(tmp_path, pdf_maker):
    path = pdf_maker(tmp_path / "manual.pdf", ["First page about sinfo.", "", "Third page about squeue."], "Ops Manual")
    doc = load_document(path)
    assert doc.title == "Ops Manual"
    assert [s.page for s in doc.sections] == [1, 3]  # the blank page has no section
    assert "squeue" in doc.section_text(doc.sections[1])


def test_kind_of_is_by_extension_case_insensitive():
    assert kind_of(Path("a/B.HTML")) == "html"
    assert kind_of(Path("x.Md")) == "markdown" == kind_of(Path("docs/intro.mdx"))
    assert (kind_of(Path("guide.rest")), kind_of(Path("Runbook.DOCX"))) == ("rst", "docx")
    assert kind_of(Path("image.png")) is None


def test_gzip_compressed_documents_are_read_as_the_file_inside(tmp_path):
    # Debian ships most of /usr/share/doc compressed: guide.md.gz is Markdown, changelog.gz is not a document
    assert kind_of(Path("doc/09-object-types.md.gz")) == "markdown" == kind_of(Path("A.MD.GZ"))
    assert (kind_of(Path("changelog.Debian.gz")), kind_of(Path("changelog.gz"))) == (None, None)
    raw = (FIXTURES / "runbook-slurmctld.md").read_bytes()
    path = tmp_path / "runbook-slurmctld.md.gz"
    path.write_bytes(gzip.compress(raw))
    doc = load_document(path)
    plain = load_document(FIXTURES / "runbook-slurmctld.md")
    assert (doc.kind, doc.title, doc.text, doc.sections) == ("markdown", plain.title, plain.text, plain.sections)
    assert doc.source == str(path)  # citations point at the file on disk
    untitled = tmp_path / "notes.txt.gz"
    untitled.write_bytes(gzip.compress(b"munge -n | unmunge\n"))
    assert load_document(untitled).title == "notes"  # named after the file inside, not "notes.txt"


def test_broken_empty_or_oversized_gzip_files_are_skipped(tmp_path):
    (tmp_path / "cut.md.gz").write_bytes(gzip.compress(b"# Title\n\n" + b"text " * 2000)[:40])
    (tmp_path / "fake.txt.gz").write_bytes(b"plain text, not gzip")
    (tmp_path / "empty.md.gz").write_bytes(gzip.compress(b""))
    (tmp_path / "bomb.txt.gz").write_bytes(gzip.compress(b"a" * 50_000))  # 50 KB unpacked from ~100 bytes
    assert "gzip" in skip_reason(tmp_path / "cut.md.gz")
    assert "gzip" in skip_reason(tmp_path / "fake.txt.gz")
    assert "empty" in skip_reason(tmp_path / "empty.md.gz")
    assert "too large unpacked" in skip_reason(tmp_path / "bomb.txt.gz", max_bytes=10_000)
    assert "unsupported" in skip_reason(tmp_path / "changelog.gz")


# --- malformed input: every case is a SkipFile with a reason, never another exception ------------


def skip_reason(path: Path, **kwargs) -> str:
    with pytest.raises(SkipFile) as caught:
        load_document(path, **kwargs)
    return str(caught.value)


def test_empty_file_is_skipped(tmp_path):
    (tmp_path / "empty.md").write_bytes(b"")
    assert "empty" in skip_reason(tmp_path / "empty.md")


def test_whitespace_only_file_is_skipped(tmp_path):
    (tmp_path / "blank.txt").write_text("  \n\n\t\n")
    assert "no text" in skip_reason(tmp_path / "blank.txt")


def test_binary_file_with_text_extension_is_skipped(tmp_path):
    (tmp_path / "core.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    assert "binary" in skip_reason(tmp_path / "core.txt")


def test_wrongly_encoded_text_is_skipped(tmp_path):
    (tmp_path / "latin1.md").write_bytes("# Résumé des opérations\n".encode("latin-1"))
    assert "UTF-8" in skip_reason(tmp_path / "latin1.md")


def test_huge_file_is_skipped_before_reading(tmp_path):
    (tmp_path / "big.txt").write_text("word " * 1000)
    assert "too large" in skip_reason(tmp_path / "big.txt", max_bytes=1000)


def test_broken_pdf_is_skipped(tmp_path, pdf_maker):
    good = pdf_maker(tmp_path / "good.pdf", ["Some text"]).read_bytes()
    (tmp_path / "truncated.pdf").write_bytes(good[: len(good) // 3])
    (tmp_path / "garbage.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 4)
    assert skip_reason(tmp_path / "truncated.pdf")
    assert skip_reason(tmp_path / "garbage.pdf")


def test_file_that_is_not_a_pdf_is_skipped(tmp_path):
    (tmp_path / "fake.pdf").write_text("just some text pretending to be a pdf")
    assert "not a PDF" in skip_reason(tmp_path / "fake.pdf")


def test_pdf_without_text_layer_is_skipped(tmp_path, pdf_maker):
    path = pdf_maker(tmp_path / "scan.pdf", [""])
    assert "no extractable text" in skip_reason(path)


def test_encrypted_pdf_is_skipped(tmp_path, pdf_maker):
    from pypdf import PdfReader, PdfWriter

    plain = pdf_maker(tmp_path / "plain.pdf", ["classified runbook"])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt("s3cret")
    writer.write(tmp_path / "locked.pdf")
    assert "encrypted" in skip_reason(tmp_path / "locked.pdf")


def test_html_with_no_main_text_is_skipped(tmp_path):
    path = tmp_path / "nav.html"
    path.write_text(
        "<html><head><script>x()</script><style>p {}</style></head><body><script>y()</script></body></html>"
    )
    assert "no main text" in skip_reason(path)


def test_unreadable_file_is_skipped(tmp_path, monkeypatch):
    path = tmp_path / "secret.md"
    path.write_text("# secret\n")
    real_read_bytes = Path.read_bytes

    def denied(self):  # what chmod 0 does for a non-root user (root ignores file permissions)
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    assert "unreadable" in skip_reason(path)


def test_directory_named_like_a_document_is_skipped(tmp_path):
    (tmp_path / "folder.md").mkdir()
    assert "unreadable" in skip_reason(tmp_path / "folder.md")


def test_unsupported_extension_is_skipped(tmp_path):
    (tmp_path / "diagram.svg").write_text("<svg/>")
    assert "unsupported" in skip_reason(tmp_path / "diagram.svg")


def test_html_definition_lists_cut_between_entries_so_a_term_keeps_its_description(tmp_path):
    from retrieval.chunking import ChunkParams, chunk_document, make_splitter

    entries = "".join(
        f"<DT>Param{i}=&lt;value&gt;<DD>What parameter {i} changes, in a sentence of about twenty words "
        f"so that a few entries fill one chunk of the splitter.\n"
        for i in range(12)
    )
    html = f"<html><body><h1>scontrol</h1><h2>SPECIFICATIONS</h2><DL COMPACT>{entries}</DL></body></html>"
    path = tmp_path / "scontrol.html"
    path.write_text(html)
    doc = load_document(path)
    assert "fill one chunk of the splitter.\n\n- Param1=" in doc.text  # a blank line between entries
    assert "- Param0=<value>\n- What parameter 0" in doc.text  # no blank line inside an entry
    splitter = make_splitter(lambda text: len(text.split()), ChunkParams(chunk_tokens=60, overlap_tokens=0))
    chunks = chunk_document(doc, splitter)
    assert len(chunks) > 2
    for chunk in chunks:  # every chunk starts on a term and ends on a description
        lines = chunk.text.strip().splitlines()
        assert lines[0].startswith("- Param") and "What parameter" in lines[-1], chunk.text


def _dconv_page(chapters: int = 3, names: tuple[str, str] = ("disable server", "enable server")) -> str:
    """A page laid out as HAProxy's manuals are (haproxy-dconv, Bootstrap): a table of contents of
    in-page links, chapter headings in a wrapper of their own, and every keyword a link to itself
    (to the first anchor of its name where two entries share one: `set server ... addr`, `... state`)."""
    toc = "".join(
        f'<div class="row"><div class="col-md-2"><b><small>{i}.</small></b></div>'
        f'<div class="col-md-10"><a href="#{i}"><b>Chapter about topic {i}</b></a></div></div>'
        for i in range(1, chapters + 1)
    )
    body = ""
    arguments = '<span style="color: #080">&lt;backend&gt;</span>/<span style="color: #080">&lt;server&gt;</span>'
    for i in range(1, chapters + 1):
        body += (
            f'<a class="anchor" id="{i}" name="{i}"></a><div class="page-header"><h1 id="chapter-{i}">'
            f'<small><a class="small" href="#{i}">{i}.</a></small> Chapter about topic {i}</h1></div>'
            f'<div><pre class="text">Chapter {i} explains how the load balancer handles topic {i}, in\n'
            f"enough words of running text to read as the main content of the page.\n</pre></div>"
        )
        for j, name in enumerate(f"{name}{i}" for name in names):
            form = f" form{j}" if names[0] == names[1] else ""
            body += (
                f'<a class="anchor" name="{i}-{name}"></a><div class="keyword"><b><a class="anchor" name="{name}"></a>'
                f'<a href="#{i}-{name.replace(" ", "%20")}">{name}</a></b> {arguments}{form}</div>'
                f'<pre class="text">Mark the server for maintenance with the command above, so that no new\n'
                f"traffic reaches it until it is enabled again (chapter {i}, {name}{form}).\n</pre>"
            )
    return (
        '<html><head><title>Management Guide</title></head><body><div id="wrapper"><div id="page-wrapper">'
        f'<div class="row"><div class="col-lg-12"><h1>Management Guide</h1>{toc}{body}</div></div>'
        "</div></div></body></html>"
    )


def test_html_keeps_headings_and_self_linked_terms_of_generated_manuals(tmp_path):
    path = tmp_path / "management.html"
    path.write_text(_dconv_page())
    doc = load_document(path)
    for i in (1, 2, 3):  # each chapter heading is a section, its words appear once (not the contents too)
        assert any(h.endswith(f"{i}. Chapter about topic {i}") for h in headings(doc)), headings(doc)
        assert doc.text.count(f"Chapter about topic {i}") == 1
        for name in (f"disable server{i}", f"enable server{i}"):  # the term, then what it does
            assert f"{name} <backend>/<server>\nMark the server for maintenance" in doc.text


def test_html_preformatted_manuals_keep_paragraphs_so_chunks_cut_between_entries(tmp_path):
    from retrieval.chunking import ChunkParams, chunk_document, make_splitter

    entries = "".join(
        f'<div class="keyword"><b>disable thing{i}</b> &lt;backend&gt;</div><pre class="text">'
        f"Take thing {i} out of service, in a first paragraph of about twenty words\n"
        f"wrapped over two lines as a text manual wraps them.\n\n"
        f"Restricted to the admin level (thing {i}).\n</pre>"
        for i in range(10)
    )
    closing = "<p>A closing <code>inline</code> word.</p>"
    html = f"<html><body><h1>Management</h1><h2>Commands</h2>{entries}{closing}</body></html>"
    path = tmp_path / "management.html"
    path.write_text(html)
    doc = load_document(path)
    assert "as a text manual wraps them.\n\nRestricted to the admin level (thing 0)." in doc.text  # its blank line
    assert "(thing 0).\n\ndisable thing1 <backend>\nTake thing 1" in doc.text  # a break after the block only
    assert "A closing inline word." in doc.text and "specrag" not in doc.text and "\n\n\n" not in doc.text
    splitter = make_splitter(lambda text: len(text.split()), ChunkParams(chunk_tokens=60, overlap_tokens=0))
    chunks = chunk_document(doc, splitter)
    assert len(chunks) > 3
    for chunk in chunks[:-1]:  # every chunk starts on a command and ends where its entry ends
        text = chunk.text.strip()
        assert text.startswith("disable thing") and text.endswith(")."), chunk.text


def test_html_prose_with_examples_is_read_as_before(tmp_path):
    prose = "".join(
        f"<p>Paragraph {i} of prose that explains the command in words, as most pages do.</p>" for i in range(6)
    )
    example = "<pre>$ scontrol show job 42\n\nJobId=42 JobName=test\n</pre>"
    path = tmp_path / "scontrol.html"
    path.write_text(f"<html><body><h1>scontrol</h1>{prose}{example}{prose.replace('Paragraph', 'Part')}</body></html>")
    text = load_document(path).text
    assert "$ scontrol show job 42\nJobId=42 JobName=test\nPart 0 of prose" in text  # the page is mostly prose


def test_html_keeps_every_entry_of_a_command_named_more_than_once(tmp_path):
    path = tmp_path / "management.html"
    path.write_text(_dconv_page(names=("set server", "set server")))
    text = load_document(path).text  # the second term links to the first entry's anchor, not to where it stands
    for i in (1, 2, 3):
        for j in (0, 1):
            assert f"set server{i} <backend>/<server> form{j}\nMark the server" in text


def test_html_headings_lose_their_permalink_marks(tmp_path):
    sections = "".join(
        f'<div class="directive-section"><h2 id="d{i}"><span id="Directive{i}">Directive{i}</span> Directive '
        f'<a title="Permanent link" href="#d{i}" class="permalink">&para;</a></h2>'
        f"<p>Directive{i} sets how the server handles case {i}, described in a sentence of some length.</p></div>"
        for i in range(4)
    )
    path = tmp_path / "core.html"
    path.write_text(f"<html><body><h1>Apache Core Features</h1>{sections}</body></html>")
    doc = load_document(path)
    assert [h for h in headings(doc) if "Directive0" in h] == ["Directive0 Directive"]
    assert "\u00b6" not in doc.text and "Directive3 sets how the server" in doc.text


def test_html_terms_linked_to_themselves_become_text_and_a_table_of_contents_stays_links():
    from lxml import etree

    from retrieval.loaders import _tree_with_pre_as_code

    tree = _tree_with_pre_as_code(_dconv_page(chapters=2).encode())
    keyword = next(div for div in tree.iter("div") if div.get("class") == "keyword")
    assert etree.tostring(keyword, encoding="unicode").startswith(
        '<div class="keyword"><b>disable server1</b> <span style="color: #080">&lt;backend&gt;'
    )  # neither the empty anchor (whose tail trafilatura drops) nor the self-link is left
    toc_links = [a for a in tree.iter("a") if a.text_content() == "Chapter about topic 1"]
    assert len(toc_links) == 1  # the contents' entry links far away: still a link, so still a menu
    heading = next(h for h in tree.iter("h1") if h.get("id") == "chapter-1")
    assert heading.getparent().get("class") == "col-lg-12"  # out of its page-header wrapper
    assert heading.text_content() == "1. Chapter about topic 1"


def _long_entry_page() -> str:
    """A man page's definition list: a short entry, a command whose description runs to several
    paragraphs (one with a nested list of its own values), a short entry, then prose after the list."""
    long = " ".join(f"Sentence {i} says what the reboot command does to the nodes." for i in range(30))
    down = " ".join(f"Down sentence {i} says why a node might stay down." for i in range(12))
    after = " ".join(f"Prose sentence {i} follows the list." for i in range(12))
    return (
        "<html><body><h1>scontrol</h1><h2>COMMANDS</h2><DL COMPACT>"
        "<DT>ping<DD>Ping the primary and secondary controllers.\n"
        "<DT>reboot [ASAP] [nextstate={RESUME|DOWN}] {ALL|&lt;NodeList&gt;}"
        f"<DD><P>{long}</P><P>Values of nextstate:</P>"
        "<DL><DT>RESUME<DD>The node resumes as normal once it registers again.\n"
        f"<DT>DOWN<DD><P>{down}</P><P>The node stays down after rebooting.</P>\n</DL>\n"
        "<DT>reconfigure<DD>Re-read the configuration file.\n"
        f"</DL><P>Everything above runs as root. {after}</P></body></html>"
    )


def test_html_definition_list_entries_are_located_with_their_terms(tmp_path):
    from retrieval.loaders import Entry

    path = tmp_path / "scontrol.html"
    path.write_text(_long_entry_page())
    doc = load_document(path)
    by_term = {e.term: e for e in doc.entries}
    assert list(by_term) == [
        "ping",
        "reboot [ASAP] [nextstate={RESUME|DOWN}] {ALL|<NodeList>}",
        "RESUME",
        "DOWN",
        "reconfigure",
    ]
    assert all(isinstance(e, Entry) for e in doc.entries)
    reboot = by_term["reboot [ASAP] [nextstate={RESUME|DOWN}] {ALL|<NodeList>}"]
    ping = by_term["ping"]
    assert doc.text[reboot.start :].startswith("- reboot [ASAP]")  # from the term's line, list mark included
    assert doc.text[: reboot.end].endswith("The node stays down after rebooting.")  # to its last description
    assert "Sentence 0 says" in doc.text[reboot.body : reboot.body + 20]  # where its description starts
    assert ping.body is not None and doc.text[ping.body :].startswith("- Ping the primary")
    assert doc.text[ping.start : ping.end] == "- ping\n- Ping the primary and secondary controllers."
    resume = by_term["RESUME"]
    assert reboot.start < resume.start < resume.end < reboot.end  # nested inside the command's entry
    assert "Everything above runs as root." not in doc.text[: max(e.end for e in doc.entries)]
    assert "\u27e6" not in doc.text  # no mark is left in the text


def test_html_entries_do_not_change_the_text(tmp_path):
    """Locating entries renders the page a second time with marks; the text the index holds is the
    rendering without them, byte for byte, whatever line breaks the marks would have moved."""
    from retrieval import loaders

    path = tmp_path / "scontrol.html"
    path.write_text(_long_entry_page())
    doc = load_document(path)
    extracted, _ = loaders._extract(path.read_bytes())
    assert doc.text == loaders._render(extracted.body)


def test_html_entries_are_located_when_a_description_is_only_a_nested_list(tmp_path):
    """A mark in an empty description would render its list mark: the page then lost every entry."""
    nested = "".join(f"<DT>Field{i}<DD>What field {i} reports.\n" for i in range(3))
    page = f"<html><body><h1>scontrol</h1><h2>NODES</h2><DL><DT>Energy<DD><DL>{nested}</DL><DT>Next<DD>Done.</DL>"
    path = tmp_path / "scontrol.html"
    path.write_text(page + "</body></html>")
    doc = load_document(path)
    by_term = {e.term: e for e in doc.entries}
    assert set(by_term) == {"Energy", "Field0", "Field1", "Field2", "Next"}
    assert by_term["Energy"].body is None and by_term["Field1"].body is not None


# --- man pages: troff source through pandoc ------------------------------------------------------

MAN = Path(__file__).parent / "fixtures" / "man"


def entry_text(doc, term: str) -> str:
    entry = next(e for e in doc.entries if e.term == term)
    return doc.text[entry.start : entry.end]


def test_a_man_page_is_titled_by_its_command_and_keeps_its_options_as_entries(tmp_path):
    assert kind_of(Path("man8/nodectl.8")) == "man" == kind_of(Path("man1/openssl.1ssl.gz"))
    assert (kind_of(Path("lib.so.1.2")), kind_of(Path("notes.0"))) == ("man", None)  # named so; read to tell
    doc = load_document(MAN / "nodectl.8")
    assert (doc.kind, doc.title) == ("man", "nodectl")  # the tool the page documents, as the checks read it
    assert headings(doc) == ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS > Node commands", "SEE ALSO"]
    assert [e.term for e in doc.entries] == ["-r, --reason=<reason>", "-w, --wait", "drain NODE", "resume NODE"]
    assert "Record why a node was drained" in entry_text(doc, "-r, --reason=<reason>")
    assert "nodectl - drain, resume and inspect compute nodes" in doc.text
    assert load_document(MAN / "cloud_compute_ssh.1").title == "cloud compute ssh"  # a subcommand's page
    packed = tmp_path / "nodectl.8.gz"  # as /usr/share/man ships them
    packed.write_bytes(gzip.compress((MAN / "nodectl.8").read_bytes()))
    assert load_document(packed).text == doc.text


def test_docbook_man_pages_keep_commands_as_entries_and_examples_on_their_own_lines():
    # DocBook writes a command as a bold paragraph over an indented block (.PP + .RS), not .TP
    doc = load_document(MAN / "unitctl.1")
    assert doc.title == "unitctl"  # the first of the names NAME gives
    assert [e.term for e in doc.entries] == ["restart PATTERN...", "is-failed PATTERN..."]
    assert "A unit that isn't running is started." in doc.text  # DocBook's \*(Aq apostrophe
    assert '"failed" state.\nunitctl is-failed nginx.service' in entry_text(doc, "is-failed PATTERN...")


def test_a_bodiless_tag_closing_an_indented_list_does_not_swallow_the_options_after_it():
    # srun's man page closes the list of -m's values with a `.TP` that has no body; pandoc then nested every
    # later option in -m's entry, so chunks about --exclusive were labelled "-m, --distribution=..."
    doc = load_document(MAN / "steprun.1")
    terms = [e.term for e in doc.entries]
    assert {"--exclusive", "--epilog=<executable>"} <= set(terms)
    distribution = next(e for e in doc.entries if e.term.startswith("-m"))
    exclusive = next(e for e in doc.entries if e.term == "--exclusive")
    assert distribution.end <= exclusive.start  # a sibling, not inside -m's description
    assert "This option applies to job and step allocations." in doc.text


def test_mdoc_man_pages_are_read_too():
    doc = load_document(MAN / "keyscan.1")
    assert (doc.kind, doc.title) == ("man", "keyscan")
    assert [e.term for e in doc.entries] == ["-p port", "-4"]
    assert "Force the use of IPv4 addresses only." in entry_text(doc, "-4")


def test_man_page_aliases_and_files_that_only_look_like_man_pages_are_skipped(tmp_path):
    assert "alias of the man page man8/nodectl.8" in skip_reason(MAN / "drainctl.8")
    assert "not a man page" in skip_reason(MAN / "messages.1")  # a rotated log, say
    (tmp_path / "libfoo.so.1").write_bytes(b"\x7fELF\x02\x01\x01\0\0\0")
    assert "binary" in skip_reason(tmp_path / "libfoo.so.1")


def test_an_example_inside_an_html_entry_starts_its_own_line(tmp_path):
    page = tmp_path / "tool.html"
    page.write_text(
        "<html><body><h1>tool</h1><dl><dt>--check</dt><dd><p>Check the file:</p>"
        "<pre>tool --check a.conf\ntool --check b.conf</pre> Exits non-zero on errors.</dd></dl></body></html>"
    )
    text = load_document(page).text
    assert "Check the file:\ntool --check a.conf\ntool --check b.conf\nExits non-zero on errors." in text


def test_a_preformatted_page_leaves_no_mark_in_its_text(tmp_path):
    # a page of preformatted text (its blank lines kept) whose `<seconds>` the parser took for an element:
    # Slurm's news page ended in the blank-line mark
    page = tmp_path / "news.html"
    page.write_text("<html><body><h1>News</h1><p>Changes.</p><pre>-- one\n\n-- set <seconds> to 30\n-- two\n\n</pre>")
    text = load_document(page).text
    assert "\u27e6" not in text and text.rstrip().endswith("-- two")


def test_a_man_page_cannot_make_the_reader_include_another_file(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("token-4f8a91\n")
    page = tmp_path / "x.1"  # pandoc unsandboxed would read the file a `.so` request names into the page
    page.write_text(f".TH X 1\n.SH NAME\nx \\- a tool\n.so {secret}\n.SH DESCRIPTION\nhello\n")
    doc = load_document(page)
    assert "hello" in doc.text and "token-4f8a91" not in doc.text
