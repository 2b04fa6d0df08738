"""The KV cache of the prompt prefix every question starts with, kept on disk between processes.

Every prompt opens with the same system prompt and demonstration (~900 tokens). A server
prefills them once at start (`Engine.warm`), but each `specrag ask` is a new process and paid
that prefill again: ~15 s of its ~38 s to the first token on a 2-core CPU. llama.cpp hands out
one sequence's KV cache as bytes (`llama_state_seq_get_data`) and takes them back, so the
first process saves them and later ones load them in a fraction of a second. The torch runner
(CachedLM) does the same with its float32 keys and values (kv_cache.cache_bytes), keyed also by
the CPU, torch's release and how its prefill multiplies, which decide those bytes.

Exactness: the bytes loaded are the bytes the prefill wrote, so the answer that follows is
token for token the one after an in-process warm-up (a web chat's first question).

A file holds a magic line, a JSON header (the runner's `state_key`, the prefix tokens, the
payload's size and sha256) and the payload. Files are written atomically (core.atomic); one whose
header, tokens or checksum do not match what is asked for is never handed to the model, so a
torn, corrupted or foreign file costs a prefill, not a wrong answer, and the next save replaces it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from core.atomic import write_atomic

MAGIC = b"specrag-prefix-kv 1\n"
KEEP = 8  # files kept per folder, newest used first: one per model setup and prompt version
HEADER_LIMIT = 1 << 20  # a header is its key and the prefix tokens: far below this
log = logging.getLogger(__name__)


class StatefulLM(Protocol):
    """A runner whose KV cache can be read out and put back as bytes (LlamaCppLM)."""

    def state_key(self) -> list[str]: ...
    def state_bytes(self) -> memoryview: ...
    def load_state(self, token_ids: list[int], payload: memoryview) -> bool: ...


class PrefixStore:
    """KV caches of prompt prefixes in `folder`, one file per runner setup and token list."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path_for(self, lm: StatefulLM, token_ids: Sequence[int]) -> Path:
        return self._path(lm.state_key(), token_ids)

    def _path(self, key: list[str], token_ids: Sequence[int]) -> Path:
        digest = hashlib.sha256(json.dumps([key, list(token_ids)]).encode()).hexdigest()
        return self.folder / f"{digest[:32]}.kv"

    def load(self, lm: object, token_ids: Sequence[int]) -> bool:
        """Put the saved cache of `token_ids` into `lm`; False (and `lm` untouched or reset) when there is none."""
        if not stateful(lm) or not token_ids:
            return False
        key = lm.state_key()
        path = self._path(key, token_ids)
        try:
            with path.open("rb") as file:
                size = os.fstat(file.fileno()).st_size
                # mapped copy-on-write, not read into the heap: the payload is handed to llama.cpp in place, and
                # its pages leave the process with the mapping (a heap copy raised `ask`'s peak RSS by 22 MB)
                data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY) if size else None
        except FileNotFoundError:
            return False
        except OSError as err:
            log.warning("cannot read the saved prompt prefix %s (%s): prefilling it instead", path, err)
            return False
        loaded = None
        if data is not None:
            with data, memoryview(data) as view:
                payload = _checked_payload(view, key, list(token_ids))
                if payload is not None:
                    with payload:
                        loaded = lm.load_state(list(token_ids), payload)
        if loaded is None:
            log.warning("ignoring %s: it is not a complete prefix cache for this model and prompt", path)
            return False
        if not loaded:
            log.warning("llama.cpp refused the saved prompt prefix %s: prefilling it instead", path)
            return False
        _touch(path)
        return True

    def save(self, lm: object, token_ids: Sequence[int]) -> None:
        """Save `lm`'s cache, which must hold exactly `token_ids`. A failure to write is logged, not raised:
        the store only saves time."""
        if not stateful(lm) or not token_ids:
            return
        payload, key = lm.state_bytes(), lm.state_key()
        header = {
            "key": key,
            "tokens": list(token_ids),
            "bytes": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        try:
            write_atomic(self._path(key, token_ids), MAGIC + json.dumps(header).encode() + b"\n" + payload)
            self._prune()
        except OSError as err:
            log.warning("cannot save the prompt prefix to %s (%s): the next start prefills it again", self.folder, err)

    def _prune(self) -> None:
        files = sorted(self.folder.glob("*.kv"), key=_mtime, reverse=True)
        for old in files[KEEP:]:
            old.unlink(missing_ok=True)


def stateful(lm: object) -> bool:
    """Can `lm` copy its KV cache out and load it back (state_key, state_bytes, load_state; llama.cpp, and the
    torch runner where every layer's cache appends in place: `state_copyable`)?"""
    methods = all(callable(getattr(lm, name, None)) for name in ("state_key", "state_bytes", "load_state"))
    return methods and getattr(lm, "state_copyable", True)


def _checked_payload(data: memoryview, key: list[str], token_ids: list[int]) -> memoryview | None:
    """The payload of a store file (a view into `data`), if its header is for `key` and `token_ids` and its
    checksum holds."""
    if data[: len(MAGIC)] != MAGIC:
        return None
    end = bytes(data[len(MAGIC) : len(MAGIC) + HEADER_LIMIT]).find(b"\n")
    if end < 0:
        return None
    try:
        header = json.loads(bytes(data[len(MAGIC) : len(MAGIC) + end]))
    except ValueError:
        return None
    payload = data[len(MAGIC) + end + 1 :]
    if not isinstance(header, dict) or header.get("key") != key or header.get("tokens") != token_ids:
        payload.release()
        return None
    if header.get("bytes") != len(payload) or header.get("sha256") != hashlib.sha256(payload).hexdigest():
        payload.release()
        return None
    return payload


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # pruned by another process meanwhile
        return 0.0


def _touch(path: Path) -> None:
    """Mark a file as just used, so pruning keeps it."""
    with contextlib.suppress(OSError):  # read-only or pruned meanwhile: it was still loaded
        os.utime(path)
