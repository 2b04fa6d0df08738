"""Slurm's man pages as troff: the gzipped man pages of Debian's `slurm-client` package.

The commands an operator runs (scontrol, sbatch, squeue, sinfo, sacct, sacctmgr, ...), slurm.conf and
the other configuration files' pages, in the form they take on a machine (`/usr/share/man`), read by the
man page reader (retrieval/man_pages.py). The same Slurm release's HTML pages are the `slurm` corpus, so
the two readers can be compared on the same text. The questions, `corpora/slurm-man/questions.jsonl`,
are the Slurm sets' questions whose gold pages are all man pages, taken as they were written (session 65).
The pages always come from the package's own copy, never from /usr/share/man, which holds every other
package's pages too. Run `python -m corpora.slurm_man [CACHE_DIR]` to fetch them and print their folder.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

from corpora.debian_docs import DebianDocs, ensure_docs, main

SLURM_MAN = DebianDocs(
    "slurm-man",
    "slurm-client",
    Path("usr/share/man"),
    "man1/scontrol.1.gz",
    20,
    page_glob="man*/*.gz",
    use_installed=False,
)

ensure_slurm_man_pages = partial(ensure_docs, SLURM_MAN)  # (cache_dir=None) -> the folder, fetched if need be


if __name__ == "__main__":
    sys.exit(main(SLURM_MAN, sys.argv[1:]))
