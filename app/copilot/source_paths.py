"""Source paths as an operator reads them: absolute paths lose the folders they all share.

The index's cache folder (`/root/.cache/specrag/corpora/slurm/html/`) says nothing and took
most of each source line. What is left still tells two corpora apart (`slurm/html/squeue.html`,
`runbooks/cvmfs.md`). Relative paths are shown as they are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def short_paths(paths: Sequence[str]) -> list[str]:
    """`paths`, in order, each absolute one relative to the folder all the absolute ones share."""
    absolute = [path for path in paths if os.path.isabs(path)]
    common = os.path.commonpath([os.path.dirname(path) for path in absolute]) if absolute else ""
    return [os.path.relpath(path, common) if os.path.isabs(path) else path for path in paths]
