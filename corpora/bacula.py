"""The Bacula 9.6 manuals as PDF: the gzipped PDFs of Debian's `bacula-doc` package.

Six manuals printed from LaTeX (main, console, utility, problems, misc, developers; about 800 pages), the
first PDF corpus: its running heads and page numbers are what `retrieval.loaders.without_running_heads`
leaves out. The package also ships the same manuals as HTML; this recipe takes the PDFs alone, so nothing is
indexed twice. Nothing in specrag was tuned on them before `corpora/bacula/questions.jsonl` was written
(session 64). Run `python -m corpora.bacula [CACHE_DIR]` to fetch the manuals and print their folder.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

from corpora.debian_docs import DebianDocs, ensure_docs, main

BACULA = DebianDocs(
    "bacula", "bacula-doc", Path("usr/share/doc/bacula-doc/pdf"), "main.pdf.gz", 5, page_glob="*.pdf.gz"
)

ensure_bacula_docs = partial(ensure_docs, BACULA)  # (cache_dir=None) -> the folder, fetched if need be


if __name__ == "__main__":
    sys.exit(main(BACULA, sys.argv[1:]))
