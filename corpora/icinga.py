"""The Icinga 2 manual (2.13): the Markdown chapters of Debian's `icinga2-doc` package, gzipped.

24 long chapters (CLI commands, REST API, object types, distributed monitoring, troubleshooting),
a fourth project's layout after Slurm, HAProxy and Apache, and the first in Markdown; nothing in
specrag was tuned on them before `corpora/icinga/questions.jsonl` was written (session 64). Run
`python -m corpora.icinga [CACHE_DIR]` to fetch the chapters and print their folder.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

from corpora.debian_docs import DebianDocs, ensure_docs, main

ICINGA = DebianDocs(
    "icinga", "icinga2-doc", Path("usr/share/doc/icinga2/markdown"), "11-cli-commands.md.gz", 20, page_glob="*.md.gz"
)

ensure_icinga_docs = partial(ensure_docs, ICINGA)  # (cache_dir=None) -> the folder, fetched if need be


if __name__ == "__main__":
    sys.exit(main(ICINGA, sys.argv[1:]))
