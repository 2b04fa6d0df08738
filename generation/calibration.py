"""Measure what a target pass over n tokens costs relative to one token, once per setup.

The draft-length policy needs c(n) / c(1). We time passes of n = 1..16 new tokens after a
few hundred tokens of context, take the fastest of a few interleaved repeats (the least
disturbed by other work on the machine), and cache the shape on disk keyed by model,
device, dtype, thread count and kernel layout, so only the first start pays (~10-20 s for
a 1.5B model on 2 CPU cores, milliseconds for a tiny test model). A measurement other work
disturbed is kept apart until a start on a quiet machine replaces it (`measured_once`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.atomic import write_atomic
from generation.arrays import random_tokens
from generation.contention import OtherLoad

if TYPE_CHECKING:
    from generation.cached_lm import CachedLM
    from generation.llamacpp_lm import LlamaCppLM

SIZES = (1, 2, 3, 4, 6, 8, 12, 16)
UNDER_LOAD = "measured under load"  # the table of measurements a busy machine disturbed, by their keys
BUSY_PROBE_SECONDS = 0.5  # how long a start watches the machine before using a disturbed measurement again
logger = logging.getLogger(__name__)


def measure_relative_costs(
    lm: CachedLM | LlamaCppLM, sizes: tuple[int, ...] = SIZES, repeats: int = 3, context: int = 256
) -> dict[int, float]:
    """c(n) / c(1) for each n in sizes, timed on `lm` (see measure_prefill_and_passes)."""
    best = measure_pass_seconds(lm, sizes, repeats, context)
    return {n: best[n] / best[sizes[0]] for n in sizes}


def measure_pass_seconds(
    lm: CachedLM | LlamaCppLM, sizes: tuple[int, ...] = SIZES, repeats: int = 3, context: int = 256
) -> dict[int, float]:
    """Seconds of a target pass over n new tokens after `context` tokens, fastest of `repeats` interleaved runs."""
    return measure_prefill_and_passes(lm, sizes, repeats, context)[1]


def measure_prefill_and_passes(
    lm: CachedLM | LlamaCppLM, sizes: tuple[int, ...] = SIZES, repeats: int = 3, context: int = 256
) -> tuple[float, dict[int, float]]:
    """Seconds of the `context`-token prefill, and of each n-token pass after it (fastest of `repeats`).

    A torch runner is measured on a cache of its own (`scratch`), so its cache keeps what it held (a judged
    prompt the answer goes on from); llama.cpp's one context is used and left empty."""
    lm = lm.scratch() if hasattr(lm, "scratch") else lm
    vocab = lm.vocab_size
    tokens = random_tokens(lm, vocab, context + max(sizes), seed=0)
    lm.reset()
    start = time.perf_counter()
    lm.extend(tokens[:context], last_only=True)
    prefill = time.perf_counter() - start
    best = dict.fromkeys(sizes, float("inf"))
    for _ in range(repeats):
        for n in sizes:
            start = time.perf_counter()
            lm.extend(tokens[context : context + n])
            best[n] = min(best[n], time.perf_counter() - start)
            lm.crop(context)
    lm.reset()
    return prefill, best


def setup_key(lm: CachedLM | LlamaCppLM, extra: str = "") -> str:
    return hashlib.sha256("|".join([*lm.setup(), extra]).encode()).hexdigest()[:16]


def cached_relative_costs(lm: CachedLM | LlamaCppLM, cache_file: Path | None, extra: str = "") -> dict[int, float]:
    """The calibrated shape for this setup, measured once and kept in `cache_file` (JSON)."""
    relative, _ = measured_once(cache_file, setup_key(lm, extra), lambda: measure_relative_costs(lm), "pass costs")
    return {int(n): float(r) for n, r in relative.items()}


def measured_once(cache_file: Path | None, key: str, measure: Callable[[], Any], what: str) -> tuple[Any, bool]:
    """`cache_file`'s entry `key`, else `measure()` kept there, and whether the value is kept for good.

    One measured while other work shared the CPU (generation/contention.py) is kept apart, under UNDER_LOAD:
    later starts on a machine that is still busy use it as it is, and the first start on a quiet machine
    measures again. Measuring on every start instead cost each start of a loaded machine 10-60 s."""
    found = recalled(read_table(cache_file), key)
    if found is not None:
        if not found[1]:
            logger.info("%s: using the one taken under load at an earlier start (other work runs now too)", what)
        return found
    with OtherLoad() as load:
        value = measure()
    if load.disturbed:
        logger.warning(
            "%s taken while other work used %.1f cores: used until a start on a quiet machine measures again",
            what,
            load.other_cores,
        )
    remember(cache_file, key, value, kept=not load.disturbed)
    return value, not load.disturbed


def recalled(table: dict, key: str) -> tuple[Any, bool] | None:
    """`key`'s entry in a calibration table and whether it is kept for good: its kept entry, else the one taken
    under load while the machine is still busy (`machine_busy`); None: measure it."""
    if key in table:
        return table[key], True
    earlier = under_load(table).get(key)
    return (earlier, False) if earlier is not None and machine_busy() else None


def remember(cache_file: Path | None, key: str, value: Any, kept: bool) -> None:
    """Write `value` into the calibration file under `key` for good, or (`kept` False) under UNDER_LOAD until
    a quiet start replaces it; atomically, and only when the table changes. The table is read here, right
    before writing, so an entry another process wrote meanwhile is not lost."""
    if cache_file is None:
        return
    table = read_table(cache_file)
    before, busy_entries = json.dumps(table, sort_keys=True), under_load(table)
    if kept:
        table[key] = value
        busy_entries.pop(key, None)
    else:
        busy_entries[key] = value
    if busy_entries or UNDER_LOAD in table:
        table[UNDER_LOAD] = busy_entries
    if json.dumps(table, sort_keys=True) != before:
        write_atomic(cache_file, json.dumps(table, indent=1, sort_keys=True))


def machine_busy(seconds: float = BUSY_PROBE_SECONDS) -> bool:
    """Does other work keep more of the CPU busy than a measurement tolerates? (this process idles meanwhile)"""
    with OtherLoad() as load:
        time.sleep(seconds)
    return load.disturbed


def under_load(table: dict) -> dict:
    """The table's entries measured under load ({} when it has none, or the file was edited into another shape)."""
    entries = table.get(UNDER_LOAD)
    return entries if isinstance(entries, dict) else {}


def read_table(path: Path | None) -> dict:
    """The calibration file's table ({} when missing or damaged)."""
    if path is None or not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a damaged calibration file is simply measured again
