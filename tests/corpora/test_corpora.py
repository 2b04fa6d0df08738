"""Offline checks of the bundled runbooks, the Slurm question set and the Slurm docs recipe."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

import corpora
from corpora import apache, bacula, debian_docs, haproxy, icinga, rsyslog, slurm, slurm_man

RUNBOOKS = sorted(corpora.bundled_runbooks_dir().glob("*.md"))
QUESTIONS_PATH = corpora.slurm_questions_path()

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_SECRET_PATTERNS = {
    "private key block": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "credential assignment": re.compile(
        r"(?i)\b(password|passwd|passphrase|secret|api[_-]?key|(?:access|auth|bearer)[_-]?token)\s*[:=]\s*['\"]?[^\s'\"<]{4,}"
    ),
    "inline ipmitool password": re.compile(r"ipmitool[^\n]*\s-P\s"),
    "inline mysql password": re.compile(r"mysql[^\n]*\s-p\S"),
}
_URL_HOST = re.compile(r"\b(?:https?|davs?|root|xroot)://([A-Za-z0-9.-]+)")
_EMAIL = re.compile(r"\b[\w.+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)")


def _prose(text: str) -> str:
    """Markdown without fenced code blocks, so '# comment' lines in shell snippets are not headings."""
    return _FENCE.sub("", text)


def _load_questions() -> list[dict]:
    lines = [ln for ln in QUESTIONS_PATH.read_text(encoding="utf-8").splitlines() if ln.strip()]
    return [json.loads(ln) for ln in lines]


# --- runbooks ---------------------------------------------------------------------------------


def test_runbook_corpus_is_bundled() -> None:
    assert corpora.bundled_runbooks_dir().is_dir()
    assert len(RUNBOOKS) >= 16


@pytest.mark.parametrize("path", RUNBOOKS, ids=lambda p: p.name)
def test_runbook_structure(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    prose = _prose(text)
    first = next(ln for ln in text.splitlines() if ln.strip())
    assert first.startswith("# "), f"{path.name}: must open with a '# Title' line"
    assert len(re.findall(r"^# ", prose, re.M)) == 1, f"{path.name}: exactly one H1 expected"
    assert len(re.findall(r"^## \S", prose, re.M)) >= 3, f"{path.name}: needs at least 3 '## ' sections"
    words = len(text.split())
    assert 400 <= words <= 1200, f"{path.name}: {words} words, expected 400-1200"
    assert text.count("```") % 2 == 0, f"{path.name}: unbalanced code fence"


@pytest.mark.parametrize("path", RUNBOOKS, ids=lambda p: p.name)
def test_runbook_has_no_secrets_or_real_addresses(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for label, pattern in _SECRET_PATTERNS.items():
        match = pattern.search(text)
        assert match is None, f"{path.name}: looks like a {label}: {match.group(0)!r}"
    for host in _URL_HOST.findall(text) + _EMAIL.findall(text):
        assert re.search(r"(^|\.)example\.(org|com|net)$", host), f"{path.name}: non-example host {host!r}"


def test_runbooks_answer_core_operator_questions() -> None:
    """The questions the web chat is demonstrated with have a direct answer in one document."""
    by_name = {p.name: p.read_text(encoding="utf-8") for p in RUNBOOKS}
    expectations = {
        "job-exit-codes.md": ["137", "SIGKILL", "143", "OUT_OF_MEMORY"],
        "certificate-expiry.md": ["openssl x509", "-enddate", "-checkend", "voms-proxy-info"],
        "crl-updates.md": ["fetch-crl", "nextupdate"],
        "escalation-matrix.md": ["P1", "On-call Site Administrator", "Site Security Officer"],
        "glossary.md": ["Space token", "CVMFS", "GOCDB"],
    }
    for name, needles in expectations.items():
        assert name in by_name, f"missing runbook {name}"
        for needle in needles:
            assert needle in by_name[name], f"{name} should mention {needle!r}"


# --- Slurm question set ---------------------------------------------------------------------------


def test_questions_are_well_formed() -> None:
    questions = _load_questions()
    assert len(questions) >= 36
    ids = [q["id"] for q in questions]
    assert len(ids) == len(set(ids)), "question ids must be unique"
    fields = {"id", "question", "gold", "answer_hint", "reference_answer", "answer_keywords", "kind"}
    for q in questions:
        assert set(q) == fields, q["id"]
        assert re.fullmatch(r"slurm-\d{3}", q["id"]), q["id"]
        assert q["question"].strip().endswith("?"), q["id"]
        assert q["answer_hint"].strip() and q["reference_answer"].strip(), q["id"]
        assert isinstance(q["gold"], list), q["id"]
        answerable = q["kind"] != "unanswerable"
        assert bool(q["gold"]) == answerable, f"{q['id']}: only unanswerable questions have no gold page"
        assert bool(q["answer_keywords"]) == answerable, f"{q['id']}: keywords are for answerable questions"
        assert all(isinstance(k, str) and k.strip() for k in q["answer_keywords"]), q["id"]
        assert len(set(q["gold"])) == len(q["gold"]), f"{q['id']}: duplicate gold page"
        for page in q["gold"]:
            assert re.fullmatch(r"[\w.-]+\.html", page), f"{q['id']}: gold must be an html basename: {page}"
            assert page not in q["question"], f"{q['id']}: question names its own gold page"


@pytest.mark.parametrize(
    ("name", "count", "unanswerable"),
    [
        ("runbook_questions.jsonl", 36, 5),
        ("runbook_fresh_questions.jsonl", 24, 5),
        ("runbook_value_questions.jsonl", 8, 0),
    ],
)
def test_runbook_questions_point_at_runbooks_that_hold_their_keywords(name: str, count: int, unanswerable: int) -> None:
    path = corpora.bundled_runbooks_dir().parent / name
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len({q["id"] for q in questions}) == len(questions) == count
    assert sum(not q["gold"] for q in questions) >= unanswerable
    for q in questions:
        assert bool(q["gold"]) == bool(q["answer_keywords"]) == (q["kind"] != "unanswerable"), q["id"]
        texts = [(corpora.bundled_runbooks_dir() / name).read_text(encoding="utf-8") for name in q["gold"]]
        for keyword in q["answer_keywords"]:
            assert any(keyword in text for text in texts), f"{q['id']}: {keyword!r} is in none of {q['gold']}"


def test_at_least_five_questions_the_docs_cannot_answer() -> None:
    assert sum(q["kind"] == "unanswerable" for q in _load_questions()) >= 5


def test_gold_pages_exist_in_slurm_docs() -> None:
    # Uses the installed package or an extracted cache when present; otherwise downloads it with apt.
    # A CorpusError here (no apt, no network) fails the test with the reason rather than skipping.
    docs = slurm.ensure_slurm_docs()
    assert sum(1 for _ in docs.glob("*.html")) >= 100
    missing = {(q["id"], page) for q in _load_questions() for page in q["gold"] if not (docs / page).is_file()}
    assert not missing, f"gold pages not in {docs}: {sorted(missing)}"


SLURM_SETS = sorted(QUESTIONS_PATH.parent.glob("*questions.jsonl"))


def test_every_slurm_question_set_reads_whole_and_points_at_pages_the_docs_have() -> None:
    """Each set the README measures (the own set, unseen, fresh to fresh10, the gate's) loads in `specrag eval`
    without a skipped row, no id comes twice across sets, and every gold page is a page of the Slurm docs: a
    typo in a set written later would score its questions as retrieval misses."""
    from app.eval.questions import read_questions

    docs = slurm.ensure_slurm_docs()
    assert len(SLURM_SETS) >= 13
    seen: dict[str, str] = {}
    for path in SLURM_SETS:
        questions, skipped = read_questions(path)
        assert questions and not skipped, f"{path.name}: {skipped}"
        for q in questions:
            assert seen.setdefault(q.id, path.name) == path.name, f"{q.id} is in {seen[q.id]} and {path.name}"
            assert q.gold_sources is not None, f"{path.name} {q.id}: no gold pages given"
            assert bool(q.gold_sources) == (q.kind != "unanswerable"), f"{path.name} {q.id}"
            assert bool(q.keywords) <= bool(q.gold_sources), f"{path.name} {q.id}: keywords for no page"
            missing = [page for page in q.gold_sources if not (docs / page).is_file()]
            assert not missing, f"{path.name} {q.id}: {missing} not in {docs}"


# --- the Debian docs recipe (Slurm, HAProxy) without network --------------------------------------------

SPEC = slurm.SLURM


def _fake_fetch(pages: int = SPEC.min_pages, fail_after_write: bool = False):
    """A stand-in for the apt-get download + dpkg -x step that writes pages under the scratch dir."""
    calls: list[Path] = []

    def fetch(spec: debian_docs.DebianDocs, workdir: Path) -> Path:
        calls.append(workdir)
        html = workdir / "root" / spec.html_subpath
        html.mkdir(parents=True)
        (html / spec.marker_page).write_text("<html>slurm.conf</html>")
        for i in range(pages - 1):
            (html / f"page{i:03d}.html").write_text("<html></html>")
        if fail_after_write:
            raise debian_docs.CorpusError("simulated failure half-way through unpacking")
        return html

    return fetch, calls


@pytest.fixture
def no_system_docs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(slurm, "SLURM", replace(SPEC, system_html=tmp_path / "not-installed"))
    return tmp_path / "cache"


def test_extracts_aside_then_renames_into_place(monkeypatch: pytest.MonkeyPatch, no_system_docs: Path) -> None:
    fetch, calls = _fake_fetch()
    monkeypatch.setattr(debian_docs, "_fetch_html", fetch)
    result = slurm.ensure_slurm_docs(no_system_docs)
    assert result == no_system_docs / "html"
    assert SPEC.has_pages(result)
    assert calls and calls[0].parent == no_system_docs and calls[0].name.startswith(".extract-")
    assert sorted(p.name for p in no_system_docs.iterdir()) == ["html"], "scratch folder must be cleaned up"

    # A second call reuses the cache and never fetches again.
    def boom(*_: object) -> Path:
        raise AssertionError("fetched although the cache is complete")

    monkeypatch.setattr(debian_docs, "_fetch_html", boom)
    assert slurm.ensure_slurm_docs(no_system_docs) == result


def test_failed_extraction_leaves_no_partial_corpus(monkeypatch: pytest.MonkeyPatch, no_system_docs: Path) -> None:
    fetch, _ = _fake_fetch(fail_after_write=True)
    monkeypatch.setattr(debian_docs, "_fetch_html", fetch)
    with pytest.raises(slurm.CorpusError, match="half-way"):
        slurm.ensure_slurm_docs(no_system_docs)
    assert list(no_system_docs.iterdir()) == []


def test_too_few_pages_is_rejected(monkeypatch: pytest.MonkeyPatch, no_system_docs: Path) -> None:
    fetch, _ = _fake_fetch(pages=3)
    monkeypatch.setattr(debian_docs, "_fetch_html", fetch)
    with pytest.raises(slurm.CorpusError, match="layout"):
        slurm.ensure_slurm_docs(no_system_docs)
    assert not (no_system_docs / "html").exists()


def test_incomplete_cache_is_replaced(monkeypatch: pytest.MonkeyPatch, no_system_docs: Path) -> None:
    stale = no_system_docs / "html"
    stale.mkdir(parents=True)
    (stale / "leftover.html").write_text("old")
    fetch, calls = _fake_fetch()
    monkeypatch.setattr(debian_docs, "_fetch_html", fetch)
    result = slurm.ensure_slurm_docs(no_system_docs)
    assert len(calls) == 1 and SPEC.has_pages(result)
    assert not (result / "leftover.html").exists()
    assert sorted(p.name for p in no_system_docs.iterdir()) == ["html"]


def test_installed_package_is_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    system = tmp_path / "usr-share-doc"
    system.mkdir()
    (system / SPEC.marker_page).write_text("x")
    for i in range(SPEC.min_pages):
        (system / f"p{i}.html").write_text("x")
    monkeypatch.setattr(slurm, "SLURM", replace(SPEC, system_html=system))
    monkeypatch.setattr(debian_docs, "_fetch_html", lambda *_: pytest.fail("must not download"))
    assert slurm.ensure_slurm_docs(tmp_path / "cache") == system


def test_man_pages_come_from_the_package_not_the_system_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # /usr/share/man holds every package's pages: with slurm-client installed it passes the page check,
    # and a corpus taken from it would index thousands of unrelated pages
    system = tmp_path / "usr-share-man"
    (system / "man1").mkdir(parents=True)
    for name in ["scontrol.1.gz"] + [f"tool{i}.1.gz" for i in range(slurm_man.SLURM_MAN.min_pages)]:
        (system / "man1" / name).write_bytes(b"x")
    spec = replace(slurm_man.SLURM_MAN, system_html=system)
    assert spec.has_pages(system)
    unpacked = tmp_path / "cache" / "html"

    def fetch(spec: debian_docs.DebianDocs, workdir: Path) -> Path:
        shutil.copytree(system, workdir / "man")
        return workdir / "man"

    monkeypatch.setattr(debian_docs, "_fetch_html", fetch)
    assert debian_docs.ensure_docs(spec, tmp_path / "cache") == unpacked
    assert spec.has_pages(unpacked)


def test_missing_apt_names_what_to_install(monkeypatch: pytest.MonkeyPatch, no_system_docs: Path) -> None:
    monkeypatch.setattr(debian_docs.shutil, "which", lambda _: None)
    with pytest.raises(slurm.CorpusError, match="slurm-wlm-doc") as err:
        slurm.ensure_slurm_docs(no_system_docs)
    assert "apt-get" in str(err.value)
    assert not (no_system_docs / "html").exists()


def test_failed_download_explains_apt_update(monkeypatch: pytest.MonkeyPatch, no_system_docs: Path) -> None:
    monkeypatch.setattr(debian_docs.shutil, "which", lambda name: f"/usr/bin/{name}")

    def fake_run(cmd, **_kwargs):
        return subprocess.CompletedProcess(cmd, 100, "", "E: Unable to locate package slurm-wlm-doc\n")

    monkeypatch.setattr(debian_docs.subprocess, "run", fake_run)
    with pytest.raises(slurm.CorpusError, match="apt-get update") as err:
        slurm.ensure_slurm_docs(no_system_docs)
    assert "Unable to locate package" in str(err.value)


def test_default_cache_dir_follows_specrag_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPECRAG_HOME", str(tmp_path))
    assert SPEC.default_cache_dir() == tmp_path / "corpora" / "slurm"
    assert haproxy.HAPROXY.default_cache_dir() == tmp_path / "corpora" / "haproxy"
    monkeypatch.delenv("SPECRAG_HOME")
    assert SPEC.default_cache_dir() == Path.home() / ".cache" / "specrag" / "corpora" / "slurm"


def test_a_markdown_corpus_counts_its_own_pages(tmp_path: Path) -> None:
    spec = replace(icinga.ICINGA, min_pages=2)
    (tmp_path / spec.marker_page).write_bytes(b"")
    (tmp_path / "index.html").write_bytes(b"")
    assert not spec.has_pages(tmp_path)  # an html page is not one of its chapters
    (tmp_path / "02-installation.md.gz").write_bytes(b"")
    assert spec.has_pages(tmp_path) and not SPEC.has_pages(tmp_path)


def test_corpus_error_is_a_specrag_error() -> None:
    from generation.errors import SpecragError

    assert issubclass(slurm.CorpusError, SpecragError)


# --- HAProxy and Apache question sets -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "ensure_docs", "count", "unanswerable"),
    [
        (haproxy.HAPROXY, haproxy.ensure_haproxy_docs, 26, 6),
        (apache.APACHE, apache.ensure_apache_docs, 26, 6),
        (icinga.ICINGA, icinga.ensure_icinga_docs, 20, 4),
        (rsyslog.RSYSLOG, rsyslog.ensure_rsyslog_docs, 20, 4),
        (bacula.BACULA, bacula.ensure_bacula_docs, 20, 4),
        (slurm_man.SLURM_MAN, slurm_man.ensure_slurm_man_pages, 31, 8),
    ],
    ids=["haproxy", "apache", "icinga", "rsyslog", "bacula", "slurm-man"],
)
def test_keywords_are_in_the_text_the_reader_keeps_of_their_gold_pages(spec, ensure_docs, count, unanswerable) -> None:
    """Every expected keyword survives ingest's reader, so keyword recall measures the model, not the reader
    (the command names of HAProxy's management guide did not, before reader revision 4)."""
    from retrieval.loaders import load_document

    path = Path(corpora.__file__).parent / spec.name / "questions.jsonl"
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len({q["id"] for q in questions}) == len(questions) == count
    assert sum(not q["gold"] for q in questions) == unanswerable
    docs = ensure_docs()  # installed, cached, or fetched with apt, as for the Slurm pages
    pages = {page.name: page for page in sorted(docs.rglob(spec.page_glob), reverse=True)}  # gold names are unique
    pages |= {page.relative_to(docs).as_posix(): page for page in docs.rglob(spec.page_glob)}  # or a path in the docs
    texts = {page: load_document(pages[page]).text for q in questions for page in q["gold"]}
    for q in questions:
        assert bool(q["gold"]) == bool(q["answer_keywords"]) == (q["kind"] != "unanswerable"), q["id"]
        for keyword in q["answer_keywords"]:
            assert any(keyword in texts[page] for page in q["gold"]), f"{q['id']}: {keyword!r} not in {q['gold']}"
