"""Did other work share the CPU while we measured? Then a measurement is used once, never cached.

A pass-cost curve timed while another process ran was cached for good and misled the draft policy
for every later start: on a 2-core AVX512-BF16 EPYC, llama.cpp's c(2)/c(1) came out 0.96 against 1.97
measured quietly, and hybrid decoded at 0.71x plain instead of 0.99x (session 43). The check compares
the CPU time the whole machine spent busy with what this process spent, over the measurement (psutil's
counters; where they cannot be read nothing is flagged).
"""

from __future__ import annotations

import time
from types import TracebackType

import psutil

# more than this many cores' worth of other work, on average over the measurement, disturbs it
OTHER_CORES_LIMIT = 0.25


def _busy(times: psutil._common.scputimes) -> float:
    """CPU seconds the machine spent working (idle, I/O wait and time stolen by a hypervisor left out)."""
    return sum(getattr(times, field, 0.0) for field in ("user", "nice", "system", "irq", "softirq"))


def _own(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


class OtherLoad:
    """Context manager: after it, `other_cores` is the mean number of cores other work kept busy."""

    def __init__(self) -> None:
        self.other_cores = 0.0
        self._process = psutil.Process()

    def __enter__(self) -> OtherLoad:
        try:
            self._start = (time.perf_counter(), _busy(psutil.cpu_times()), _own(self._process))
        except (OSError, psutil.Error):
            self._start = None
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._start is None:
            return
        try:
            wall, busy, own = time.perf_counter(), _busy(psutil.cpu_times()), _own(self._process)
        except (OSError, psutil.Error):
            return
        elapsed = wall - self._start[0]
        if elapsed > 0:
            self.other_cores = max(0.0, (busy - self._start[1]) - (own - self._start[2])) / elapsed

    @property
    def disturbed(self) -> bool:
        return self.other_cores > OTHER_CORES_LIMIT
