"""Recipe for a documentation corpus that Debian packages as pages (HTML: `slurm-wlm-doc`, `haproxy-doc`;
gzipped Markdown: `icinga2-doc`; man pages: `slurm-client`).

`ensure_docs(spec)` returns the folder of the package's HTML pages. It prefers an installed
package, then a previously extracted cache, and otherwise downloads the .deb with `apt-get
download` (no root needed) and unpacks it with `dpkg -x`. Extraction happens in a scratch folder
inside the cache and the html folder is renamed into place in one step, so an interrupted run
never leaves a half-filled corpus.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.errors import SpecragError
from core.paths import cache_root

_TIMEOUT_S = 600


class CorpusError(SpecragError):
    """A corpus could not be found, downloaded or unpacked."""


@dataclass(frozen=True)
class DebianDocs:
    """Where one package puts its pages, and how to tell a complete set from a stub.

    `marker_page` is a page every release ships; with `min_pages` it tells a real corpus from a
    stub or a docker image whose dpkg config drops /usr/share/doc.
    """

    name: str  # the corpus' name: `specrag ingest --corpus NAME`, and its cache folder
    package: str
    html_subpath: Path  # relative to the filesystem root (see `dpkg -c PACKAGE_*.deb`)
    marker_page: str
    min_pages: int
    system_html: Path | None = None  # where an installed package has them; default / html_subpath
    page_glob: str = "*.html"  # what a page's file name looks like
    # False where the installed pages share their folder with other packages' (/usr/share/man): the
    # corpus is then always the package's own unpacked copy, never the whole system folder
    use_installed: bool = True

    @property
    def installed_html(self) -> Path:
        return self.system_html or Path("/") / self.html_subpath

    def default_cache_dir(self) -> Path:
        """`corpora/<name>` under the cache root ($SPECRAG_HOME, else ~/.cache/specrag)."""
        return cache_root() / "corpora" / self.name

    def has_pages(self, folder: Path) -> bool:
        """True when `folder` looks like a complete set of the package's HTML pages."""
        if not (folder / self.marker_page).is_file():
            return False
        return sum(1 for _ in folder.glob(self.page_glob)) >= self.min_pages


def ensure_docs(spec: DebianDocs, cache_dir: Path | None = None) -> Path:
    """Return a folder holding the package's HTML pages, downloading and unpacking them if needed."""
    if spec.use_installed and spec.has_pages(spec.installed_html):
        return spec.installed_html
    cache = Path(cache_dir).expanduser() if cache_dir is not None else spec.default_cache_dir()
    final = cache / "html"
    if spec.has_pages(final):
        return final
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".extract-", dir=cache) as scratch:
        html = _fetch_html(spec, Path(scratch))
        if not spec.has_pages(html):
            raise CorpusError(
                f"{spec.package} unpacked, but {html} lacks {spec.marker_page} or has fewer than {spec.min_pages} "
                f"pages; the package layout may have changed (check `dpkg -c` on the .deb)."
            )
        _publish(spec, html, final)
    return final


def _publish(spec: DebianDocs, html: Path, final: Path) -> None:
    """Rename the unpacked folder to `final`; an incomplete leftover there is moved aside first."""
    if final.exists():
        if spec.has_pages(final):  # another process won the race
            return
        stale = final.with_name(f".stale-{os.getpid()}-{final.name}")
        final.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        html.rename(final)
    except OSError:
        if not spec.has_pages(final):
            raise


def _fetch_html(spec: DebianDocs, workdir: Path) -> Path:
    """Download the .deb into `workdir`, unpack it there and return the html folder inside it."""
    deb = _download_deb(spec, workdir / "deb")
    root = workdir / "root"
    _run(spec, ["dpkg", "-x", str(deb), str(root)], what=f"unpacking {deb.name}")
    return root / spec.html_subpath


def _download_deb(spec: DebianDocs, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    _run(spec, ["apt-get", "download", spec.package], what=f"downloading {spec.package}", cwd=dest)
    debs = sorted(dest.glob(f"{spec.package}_*.deb"))
    if not debs:
        raise CorpusError(f"`apt-get download {spec.package}` reported success but left no .deb in {dest}.")
    return debs[-1]


def _run(spec: DebianDocs, cmd: list[str], *, what: str, cwd: Path | None = None) -> None:
    if shutil.which(cmd[0]) is None:
        raise CorpusError(
            f"{what} needs `{cmd[0]}`, which is not on PATH. The {spec.name} corpus is built from Debian's "
            f"{spec.package} package: run on a Debian/Ubuntu system with apt and dpkg, or install the package "
            f"(`apt-get install {spec.package}`) so its pages appear under {spec.installed_html}."
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
            f"mirror is reachable; alternatively `apt-get install {spec.package}`."
        )


def main(spec: DebianDocs, args: list[str]) -> int:
    """`python -m corpora.<name> [CACHE_DIR]`: fetch the pages and print their folder."""
    import sys

    try:
        path = ensure_docs(spec, Path(args[0]) if args else None)
    except CorpusError as err:
        print(f"corpora.{spec.name}: error: {err}", file=sys.stderr)
        return 2
    print(path)
    return 0
