"""The HAProxy 2.6 manuals: the HTML pages of Debian's `haproxy-doc` package.

Three long pages (starter guide, configuration manual, management guide), written by another
project in another layout than the Slurm pages; nothing in specrag was tuned on them before
`corpora/haproxy/questions.jsonl` was written. Run `python -m corpora.haproxy [CACHE_DIR]` to
fetch the pages and print their folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from corpora.debian_docs import DebianDocs, ensure_docs, main

HAPROXY = DebianDocs("haproxy", "haproxy-doc", Path("usr/share/doc/haproxy/html"), "configuration.html", 3)


def ensure_haproxy_docs(cache_dir: Path | None = None) -> Path:
    """Return a folder holding the HAProxy HTML manuals, downloading and unpacking them if needed."""
    return ensure_docs(HAPROXY, cache_dir)


if __name__ == "__main__":
    sys.exit(main(HAPROXY, sys.argv[1:]))
