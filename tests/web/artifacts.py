"""Where the web tests write screenshots: $SPECRAG_TEST_ARTIFACTS, else a tmp folder."""

from __future__ import annotations

import os
from pathlib import Path


def artifacts_dir(tmp: Path) -> Path:
    folder = Path(os.environ.get("SPECRAG_TEST_ARTIFACTS") or tmp / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
