"""The Apache HTTP Server 2.4 manual in English: the HTML pages of Debian's `apache2-doc` package.

244 pages in folders (`mod/`, `programs/`, `howto/`, `ssl/`...), a third project's layout after
the Slurm and HAProxy pages; nothing in specrag was tuned on them before
`corpora/apache/questions.jsonl` was written. Run `python -m corpora.apache [CACHE_DIR]` to fetch
the pages and print their folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from corpora.debian_docs import DebianDocs, ensure_docs, main

APACHE = DebianDocs("apache", "apache2-doc", Path("usr/share/doc/apache2-doc/manual/en"), "stopping.html", 25)


def ensure_apache_docs(cache_dir: Path | None = None) -> Path:
    """Return a folder holding the English Apache manual, downloading and unpacking it if needed."""
    return ensure_docs(APACHE, cache_dir)


if __name__ == "__main__":
    sys.exit(main(APACHE, sys.argv[1:]))
