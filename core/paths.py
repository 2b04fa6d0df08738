"""One cache root for everything specrag keeps on disk.

`$SPECRAG_HOME` if set, else `~/.cache/specrag`. Under it: `models/` (assembled and
converted weights), `index/` (the default retrieval index), `corpora/` (downloaded
document sets), `calibration.json` (measured pass costs per machine), `feedback.db` and
`prefix-kv/` (the KV cache of the prompt prefix every question starts with).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "SPECRAG_HOME"


def cache_root() -> Path:
    home = os.environ.get(ENV_VAR)
    return Path(home).expanduser() if home else Path.home() / ".cache" / "specrag"


def prefix_store_dir() -> Path:
    """Where saved KV caches of the shared prompt prefix live (generation/prefix_store.py)."""
    return cache_root() / "prefix-kv"
