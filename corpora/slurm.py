"""The Slurm documentation corpus: the HTML pages of Debian's `slurm-wlm-doc` package (~130 pages).

Run `python -m corpora.slurm [CACHE_DIR]` to fetch the pages and print their folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from corpora.debian_docs import CorpusError, DebianDocs, ensure_docs, main

SLURM = DebianDocs("slurm", "slurm-wlm-doc", Path("usr/share/doc/slurm-wlm/html"), "slurm.conf.html", 50)


def ensure_slurm_docs(cache_dir: Path | None = None) -> Path:
    """Return a folder holding the Slurm HTML docs, downloading and unpacking them if needed."""
    return ensure_docs(SLURM, cache_dir)


__all__ = ["SLURM", "CorpusError", "ensure_slurm_docs"]

if __name__ == "__main__":
    sys.exit(main(SLURM, sys.argv[1:]))
