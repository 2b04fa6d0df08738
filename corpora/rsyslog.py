"""The rsyslog manual (8.2302): the HTML pages of Debian's `rsyslog-doc` package, a Sphinx build.

318 pages in folders (`configuration/modules/`, `tutorials/`, `troubleshooting/`...), the first corpus built
by Sphinx, whose `_sources` copies of the pages ingest skips (retrieval/scan.py); nothing in specrag was tuned
on them before `corpora/rsyslog/questions.jsonl` was written (session 64). Run `python -m corpora.rsyslog
[CACHE_DIR]` to fetch the pages and print their folder.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

from corpora.debian_docs import DebianDocs, ensure_docs, main

RSYSLOG = DebianDocs(
    "rsyslog", "rsyslog-doc", Path("usr/share/doc/rsyslog-doc/html"), "troubleshooting/troubleshoot.html", 5
)

ensure_rsyslog_docs = partial(ensure_docs, RSYSLOG)  # (cache_dir=None) -> the folder, fetched if need be


if __name__ == "__main__":
    sys.exit(main(RSYSLOG, sys.argv[1:]))
