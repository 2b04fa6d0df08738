"""Read (and chunk) many files on all cores: HTML extraction and token counting are CPU-bound
and files are independent.

Workers are spawned, not forked: the ingesting process may already hold torch and its
OpenMP threads (an embedder passed in, a test session), and forking those is unsafe.
If the pool dies (a parser crashing its worker), the remaining files are read here, so
one bad file still costs only itself.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

from retrieval.chunking import Chunk, ChunkRecipe, Progress, chunk_document, splitter_for
from retrieval.errors import SkipFile
from retrieval.loaders import Document, load_document

POOL_MIN_FILES = 32  # below this, starting workers (~1 s of imports) costs more than it saves
MAX_WORKERS = 8


@dataclass
class Loaded:
    """One file's outcome: its document (and chunks, when a recipe was given), or why it was skipped."""

    document: Document | None = None
    chunks: list[Chunk] | None = None
    skipped: str | None = None


def read_one(path: str, max_bytes: int, recipe: ChunkRecipe | None = None, progress: Progress | None = None) -> Loaded:
    try:
        document = load_document(Path(path), max_bytes)
    except SkipFile as why:
        return Loaded(skipped=str(why))
    return Loaded(document, chunk_document(document, splitter_for(recipe), progress) if recipe else None)


def read_all(
    paths: list[str],
    max_bytes: int,
    recipe: ChunkRecipe | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> Iterator[tuple[str, Loaded]]:
    """(path, outcome) for every path, in order; progress hears of chunked characters in this process."""
    workers = min(workers or os.cpu_count() or 1, MAX_WORKERS, len(paths))
    done = 0
    if workers >= 2 and len(paths) >= POOL_MIN_FILES:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        try:
            for loaded in pool.map(read_one, paths, repeat(max_bytes), repeat(recipe), chunksize=4):
                yield paths[done], loaded
                done += 1
        except BrokenProcessPool:
            pass  # read what is left in this process
        finally:
            # on Ctrl-C or an abandoned iteration, drop the queued files instead of reading them all
            pool.shutdown(wait=True, cancel_futures=True)
    for path in paths[done:]:
        yield path, read_one(path, max_bytes, recipe, progress)
