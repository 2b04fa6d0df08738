"""Man pages (troff source, `man` or `mdoc` macros), read through pandoc and then the HTML reader.

An operator's tool documentation is mostly man pages (`/usr/share/man/man8/*.8.gz`, a package's
`sbatch.1`), which no other reader takes. pandoc (pypandoc-binary, from PyPI) reads both macro
sets into HTML; the HTML reader then gives the page its sections and its entries. Two things
are shaped first, so a man page reads like the HTML ones the copilot's checks know (Slurm's):

- the page is titled by its command's name from the NAME section (`apt-get`, `slurm.conf`),
  which the checks read as the tool a page documents (app/copilot/subcommands.py);
- an option or command written as a bold term over an indented block (`.PP` + `.RS`, as
  DocBook and Asciidoctor write man pages: systemctl, apt-get, mount) becomes a
  definition-list entry, as `.TP` already does, so chunks keep an option with its description.

pandoc runs sandboxed (a `.so` request cannot read another file) and under a time limit.
"""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

from lxml import html as lxml_html

from retrieval.errors import SkipFile

# .1, .8, .3pm, .1ssl: a man page's file name ends in its section
MAN_SUFFIX = re.compile(r"\.[1-9][a-z0-9]{0,7}")
PANDOC_SECONDS = 60
MAX_TERM_CHARS = 160  # a bold line longer than this over an indented block is prose, not a term
_REQUEST = re.compile(r"^[.'][ \t]*(TH|SH|Dd|Dt|Sh)\b", re.M)  # a page's own macros, not just comments
_MDOC = re.compile(r"^\.[ \t]*(Dd|Dt|Sh)\b", re.M)
_SOURCE_ONLY = re.compile(r"^\.so[ \t]+(\S+)", re.M)  # `.so man8/foo.8`: the page is another's alias
# DocBook's man pages define their apostrophe as a string (`.ds Aq \(aq`) behind a condition pandoc
# does not evaluate, so "aren\*(Aqt" came out "arent"
_DOCBOOK_APOSTROPHE = re.compile(r"\\\*(?:\(Aq|\[Aq\])")
_TERM_TAGS = ("strong", "b", "em", "i", "code")
# `.TP` with a tag line and no body, right before `.RE` (srun's "This option applies to job and step allocations."
# closing the list of -m's values): pandoc then nests every later option inside the entry around the `.RS`
# block, so srun's -m entry held 59% of the page. As an indented paragraph it reads the same.
_BODILESS_TAG = re.compile(r"^\.TP[^\n]*\n((?:[^.\n][^\n]*)?)\n(?=\.RE\b)", re.M)


def is_man_page_name(path: Path) -> bool:
    return MAN_SUFFIX.fullmatch(path.suffix.lower()) is not None


def man_page_html(path: Path, source: str) -> str:
    """A whole HTML page for the troff `source`, titled and headed by the command's name."""
    if not _REQUEST.search(source):
        alias = _SOURCE_ONLY.search(source)
        if alias:
            raise SkipFile(f"an alias of the man page {alias.group(1)} (read that page itself)")
        raise SkipFile("not a man page (no .TH, .SH or .Dd request)")
    body = lxml_html.fragment_fromstring(
        _pandoc(source, "mdoc" if _MDOC.search(source) else "man"), create_parent="main"
    )
    _terms_as_entries(body)
    name = _command_name(body) or path.stem  # `nodectl.8` (the reader gets the name inside a `.gz`)
    heading = lxml_html.Element("h1")
    heading.text = name
    body.insert(0, heading)
    page = lxml_html.tostring(body, encoding="unicode")
    return f"<html><head><title>{html.escape(name)}</title></head><body>{page}</body></html>"


def _pandoc(source: str, macros: str) -> str:
    import pypandoc

    command = [pypandoc.get_pandoc_path(), "--sandbox", "-f", macros, "-t", "html", "--wrap=none"]
    command.append("--shift-heading-level-by=1")  # the command's name is the page's one h1
    try:
        done = subprocess.run(
            command,
            input=_BODILESS_TAG.sub(r".IP\n\1\n", _DOCBOOK_APOSTROPHE.sub("'", source)),
            capture_output=True,
            text=True,
            timeout=PANDOC_SECONDS,
        )
    except subprocess.TimeoutExpired as err:
        raise SkipFile(f"pandoc took over {PANDOC_SECONDS} s to read it as a man page") from err
    except OSError as err:
        raise SkipFile(f"cannot run pandoc to read man pages ({err.strerror}): pip install pypandoc-binary") from err
    if done.returncode != 0 or not done.stdout.strip():
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SkipFile(f"pandoc could not read it as a man page ({why})")
    return done.stdout


def _command_name(body) -> str | None:
    """The first name the NAME section gives ("apt-get - APT package handling utility" -> apt-get; "systemd,
    init - ..." -> systemd; "gcloud compute ssh - ..." -> gcloud compute ssh)."""
    for heading in body.iter("h2"):
        if heading.text_content().strip().upper() == "NAME":
            following = heading.getnext()
            if following is not None and following.tag == "p":
                names = re.split(r"\s[-\u2013\u2014]\s", following.text_content(), maxsplit=1)[0]
                return " ".join(names.split(",")[0].split()) or None  # `gcloud compute ssh` is one name
    return None


def _terms_as_entries(body) -> None:
    """`<p><strong>--all</strong></p><blockquote>...</blockquote>` -> one definition-list entry; entries
    in a row share one list."""
    for quote in list(body.iter("blockquote")):
        term = quote.getprevious()
        if term is None or not _is_term(term):
            continue
        entry_list = term.getprevious()
        if entry_list is None or entry_list.tag != "dl" or entry_list.get("data-from") != "terms":
            entry_list = lxml_html.Element("dl", {"data-from": "terms"})
            term.addprevious(entry_list)
        term.tag = "dt"
        description = lxml_html.Element("dd")
        description.text = quote.text
        description.extend(list(quote))
        entry_list.append(term)  # moves it
        entry_list.append(description)
        quote.getparent().remove(quote)


def _is_term(paragraph) -> bool:
    """A paragraph that opens with a bold or code term, as short as a term is."""
    return (
        paragraph.tag == "p"
        and not (paragraph.text or "").strip()
        and len(paragraph)
        and paragraph[0].tag in _TERM_TAGS
        and len(paragraph.text_content()) <= MAX_TERM_CHARS
    )
