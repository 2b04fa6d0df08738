"""Recipe for the Slurm documentation corpus: the HTML pages of Debian's `slurm-wlm-doc` package.

`ensure_slurm_docs()` returns a folder of ~130 HTML pages. It prefers an installed package, then a
previously extracted cache, and otherwise downloads the .deb with `apt-get download` (no root needed)
and unpacks it with `dpkg -x`. Extraction happens in a scratch folder inside the cache and the html
folder is renamed into place in one step, so an interrupted run never leaves a half-filled corpus.

Run `python -m corpora.slurm [CACHE_DIR]` to fetch the pages and print their folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from core.errors import SpecragError
from core.paths import cache_root

PACKAGE = "slurm-wlm-doc"
# Where the package puts its pages, relative to the filesystem root (see `dpkg -c slurm-wlm-doc_*.deb`).
HTML_SUBPATH = Path("usr/share/doc/slurm-wlm/html")
SYSTEM_HTML = Path("/") / HTML_SUBPATH
# A page every release ships; together with MIN_PAGES it tells a real corpus from a stub or a
# docker image whose dpkg config drops /usr/share/doc.
MARKER_PAGE = "slurm.conf.html"
MIN_PAGES = 50
_TIMEOUT_S = 600


class CorpusError(SpecragError):
    """A corpus could not be found, downloaded or unpacked."""


def default_cache_dir() -> Path:
    """`corpora/slurm` under the cache root ($SPECRAG_HOME, else ~/.cache/specrag)."""
    base = cache_root()
    return base / "corpora" / "slurm"


def has_pages(folder: Path) -> bool:
    """True when `folder` looks like a complete Slurm HTML documentation set."""
    if not (folder / MARKER_PAGE).is_file():
        return False
    return sum(1 for _ in folder.glob("*.html")) >= MIN_PAGES


def ensure_slurm_docs(cache_dir: Path | None = None) -> Path:
    """Return a folder holding the Slurm HTML docs, downloading and unpacking them if needed."""
    if has_pages(SYSTEM_HTML):
        return SYSTEM_HTML
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    final = cache / "html"
    if has_pages(final):
        return final
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".extract-", dir=cache) as scratch:
        html = _fetch_html(Path(scratch))
        if not has_pages(html):
            raise CorpusError(
                f"{PACKAGE} unpacked, but {html} lacks {MARKER_PAGE} or has fewer than {MIN_PAGES} pages; "
                f"the package layout may have changed (check `dpkg -c` on the .deb)."
            )
        _publish(html, final)
    return final


def _publish(html: Path, final: Path) -> None:
    """Rename the unpacked folder to `final`; an incomplete leftover there is moved aside first."""
    if final.exists():
        if has_pages(final):  # another process won the race
            return
        stale = final.with_name(f".stale-{os.getpid()}-{final.name}")
        final.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        html.rename(final)
    except OSError:
        if not has_pages(final):
            raise


def _fetch_html(workdir: Path) -> Path:
    """Download the .deb into `workdir`, unpack it there and return the html folder inside it."""
    deb = _download_deb(workdir / "deb")
    root = workdir / "root"
    _run(["dpkg", "-x", str(deb), str(root)], what=f"unpacking {deb.name}")
    return root / HTML_SUBPATH


def _download_deb(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    _run(["apt-get", "download", PACKAGE], what=f"downloading {PACKAGE}", cwd=dest)
    debs = sorted(dest.glob(f"{PACKAGE}_*.deb"))
    if not debs:
        raise CorpusError(f"`apt-get download {PACKAGE}` reported success but left no .deb in {dest}.")
    return debs[-1]


def _run(cmd: list[str], *, what: str, cwd: Path | None = None) -> None:
    if shutil.which(cmd[0]) is None:
        raise CorpusError(
            f"{what} needs `{cmd[0]}`, which is not on PATH. The Slurm corpus is built from Debian's "
            f"{PACKAGE} package: run on a Debian/Ubuntu system with apt and dpkg, or install the package "
            f"(`apt-get install {PACKAGE}`) so its pages appear under {SYSTEM_HTML}."
        )
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CorpusError(f"{what} failed: {err}") from err
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise CorpusError(
            f"{what} failed (`{' '.join(cmd)}` exited {proc.returncode}): {' / '.join(detail) or 'no output'}. "
            f"If apt cannot locate the package, run `apt-get update` first (as root) and check that a Debian "
            f"mirror is reachable; alternatively `apt-get install {PACKAGE}`."
        )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        path = ensure_slurm_docs(Path(args[0]) if args else None)
    except CorpusError as err:
        print(f"corpora.slurm: error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
