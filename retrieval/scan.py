"""Which files an ingest may read: supported files under the roots, and nothing outside them.

A symlink whose target leaves its root is skipped and reported unless `follow_symlinks` is set
(an `innocent.md -> ../secret.md` would otherwise make the secret searchable). Symlinked folders
inside the root are not entered twice; with `follow_symlinks` each real folder is walked once, so
link cycles end. Hidden entries and the index folder itself are never visited. A folder that
cannot be listed is reported, not silently dropped. A built Sphinx site's `_sources` folder holds
a `.rst.txt` copy of every page beside the HTML: indexed too, each page took two of a question's
passages (rsyslog's manual, session 64), so it is skipped and reported. A symlink to a file of an
unsupported type counts as ignored, whether or not its target exists (Debian's Sphinx pages link
their `.js` files to another package).

Roots and the embedding model recorded in a manifest are data from disk, not the user's word:
`untrusted_roots` names the tracked roots an ingest may not rescan on its own (those neither
given in this run nor under a configured default location).
"""

from __future__ import annotations

import importlib.util
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from core.paths import cache_root
from retrieval.loaders import kind_of

SPHINX_BUILD_MARKS = ("searchindex.js", "objects.inv")


@dataclass
class Scan:
    files: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"}
    ignored: Counter[str] = field(default_factory=Counter)  # unsupported extension -> files

    def skip(self, path: Path, reason: str) -> None:
        self.skipped.append({"path": str(path), "reason": reason})

    def ignore(self, path: Path) -> None:
        """A file no reader takes, counted by its extension."""
        self.ignored[path.suffix.lower() or "(none)"] += 1


def scan(roots: list[str], index_dir: Path, follow_symlinks: bool = False) -> Scan:
    """Supported files under the roots (resolved absolute paths), sorted."""
    result, found = Scan(), set()
    for root in map(Path, roots):
        if root.is_file():
            if kind_of(root):
                found.add(str(root))
            else:
                result.skip(root, f"unsupported file type {root.suffix!r}")
            continue
        found |= _walk(root, index_dir, follow_symlinks, result)
    result.files = sorted(found)
    return result


def _walk(root: Path, index_dir: Path, follow: bool, result: Scan) -> set[str]:
    found: set[str] = set()
    real_root, visited, stack = root.resolve(), {root.resolve()}, [root]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as err:
            result.skip(here, f"unreadable folder ({err.strerror or err}); check its permissions")
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith(".") or path == index_dir:
                continue
            if entry.is_symlink() and not entry.is_dir() and not kind_of(path):
                result.ignore(path)
                continue
            if entry.is_symlink() and not _link_allowed(path, real_root, follow, result):
                continue
            if entry.is_dir() and _sphinx_sources(path):
                result.skip(path, "a Sphinx build's copies of its pages' sources; the pages beside it are indexed")
                continue
            if entry.is_dir():
                real = path.resolve()
                if real not in visited and (follow or not entry.is_symlink()):
                    visited.add(real)
                    stack.append(path)
            elif not entry.is_file():
                continue
            elif kind_of(path):
                found.add(str(path))
            else:
                result.ignore(path)
    return found


def _sphinx_sources(folder: Path) -> bool:
    """Is `folder` the `_sources` of a built Sphinx site (its search index or inventory beside it)?"""
    return folder.name == "_sources" and any((folder.parent / mark).is_file() for mark in SPHINX_BUILD_MARKS)


def _link_allowed(path: Path, real_root: Path, follow: bool, result: Scan) -> bool:
    target = Path(os.path.realpath(path))
    if not target.exists():
        result.skip(path, f"broken symlink (to {target})")
        return False
    if follow or target.is_relative_to(real_root):
        return True
    result.skip(path, f"symlink leaves {real_root} (to {target}); pass --follow-symlinks to index it")
    return False


# --- what a manifest may point at -----------------------------------------------------------------


def default_roots() -> list[Path]:
    """Configured default locations: the bundled corpora and downloaded corpora under the cache."""
    places = [cache_root() / "corpora"]
    spec = importlib.util.find_spec("corpora")  # finds the package without importing it
    if spec is not None and spec.submodule_search_locations:
        places += [Path(p) for p in spec.submodule_search_locations]
    return [p.expanduser().resolve() for p in places]


def untrusted_roots(tracked: list[str], given: list[str], trusted: list[Path]) -> list[str]:
    """Tracked roots that this run may not rescan: not given now and not under a trusted place."""
    allowed = [Path(p) for p in given] + trusted
    return [r for r in tracked if not any(Path(r).is_relative_to(place) for place in allowed)]
