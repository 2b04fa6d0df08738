"""Reader leases on index generations: a reader pins what it reads, a deleter skips what is pinned.

Every generation holds an empty `lease` file. A reader opens it and takes a shared flock
(non-blocking) and keeps it until the generation is loaded into memory. Whoever deletes a
generation first takes an exclusive flock on the same file without blocking: if a reader holds
it, the generation stays. The kernel drops flocks when a process dies, so a reader killed with
SIGKILL never pins a generation for ever, and nothing has to expire.

Races are closed by re-checking after the lock: the deleter renames the generation away while
holding its exclusive lock, so a reader that locked a lease file after that finds the path gone
(or naming another inode) and tries the new live generation instead.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from pathlib import Path

LEASE = "lease"
TRASH_PREFIX = ".trash-"


class Lease:
    """A shared lock on one generation; release() (or leaving the `with` block) unpins it."""

    def __init__(self, generation: Path, fd: int) -> None:
        self.generation, self._fd = generation, fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def create_lease(generation: Path) -> None:
    """Called by the writer while building a generation, before it can become live."""
    (generation / LEASE).touch()


def pin(generation: Path) -> Lease | None:
    """Pin generation for reading; None if it is gone or being deleted (read CURRENT again)."""
    path = generation / LEASE
    try:
        # O_CREAT: a generation written before leases existed gets its lease file from its first reader
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        if _same_file(path, fd):
            return Lease(generation, fd)
    except BlockingIOError:
        pass  # a deleter holds it exclusively right now
    os.close(fd)
    return None


def _same_file(path: Path, fd: int) -> bool:
    try:
        on_disk, held = os.stat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (on_disk.st_dev, on_disk.st_ino) == (held.st_dev, held.st_ino)


def remove_if_unpinned(generation: Path) -> bool:
    """Delete generation unless a reader pins it; True when it is gone afterwards."""
    try:
        fd = os.open(generation / LEASE, os.O_RDONLY)
    except FileNotFoundError:
        fd = None  # no lease file: nobody can pin it (an interrupted delete or a legacy generation)
    except NotADirectoryError:
        return False
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        trash = generation.parent / f"{TRASH_PREFIX}{generation.name}-{secrets.token_hex(3)}"
        os.rename(generation, trash)  # from here no reader can find it by name
    except BlockingIOError:
        return False
    except FileNotFoundError:
        return True  # another deleter won
    finally:
        if fd is not None:
            os.close(fd)
    shutil.rmtree(trash, ignore_errors=True)
    return True


def trash_of(index_dir: Path, name: str) -> list[Path]:
    """Leftovers of deletions of generation `name` that were interrupted mid-way."""
    return [p for p in index_dir.glob(f"{TRASH_PREFIX}{name}-*") if p.is_dir()]
