"""At most N answers at once, first come first served, and no answer twice for one message.

`AnswerQueue` runs jobs on N worker threads (never on a Slack listener thread) in the
order they were submitted; `submit` returns the job's place in the queue (0: it starts
now) so the caller can tell the asker. The pipeline serves one answer at a time per
Copilot (it holds the engine lock from prefill to the last token), so with N > 1 the
extra workers retrieve and wait at the engine, showing their status meanwhile.

`Deduper` remembers the keys of recent deliveries (event id, client_msg_id, channel+ts):
Slack retries an event it thinks was not acknowledged, and a DM can arrive both as a
message and as a mention, but one message gets one answer.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Any

log = logging.getLogger(__name__)


class Deduper:
    def __init__(self, capacity: int = 10_000) -> None:
        self._seen: OrderedDict[Hashable, None] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def first_time(self, *keys: Hashable) -> bool:
        """True, and every key remembered, when none of `keys` was seen before (None keys are skipped)."""
        keys = tuple(k for k in keys if k is not None)
        with self._lock:
            if any(k in self._seen for k in keys):
                return False
            for key in keys:
                self._seen[key] = None
            while len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return True


class AnswerQueue:
    def __init__(self, workers: int, run: Callable[[Any], None], name: str = "specrag-slack") -> None:
        if workers < 1:
            raise ValueError(f"the number of workers must be at least 1, got {workers}")
        self.workers = workers
        self._run = run
        self._waiting: deque[Any] = deque()
        self._pending = 0  # submitted and not finished
        self._closed = False
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Any) -> int:
        """Queue a job; returns how many jobs must finish before it starts (0: it starts now)."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the answer queue is closed")
            place = max(0, self._pending - self.workers + 1)
            self._pending += 1
            self._waiting.append(job)
            self._cond.notify()
            return place

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def close(self, timeout: float | None = None) -> None:
        """Stop taking jobs; workers finish what is queued, then exit."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if not self._waiting:
                    return
                job = self._waiting.popleft()
            try:
                self._run(job)
            except Exception:  # the runner reports its own failures; this keeps the worker alive
                log.exception("an answer job failed")
            finally:
                with self._cond:
                    self._pending -= 1
