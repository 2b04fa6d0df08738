"""Stop strings over streamed text: hold back just enough text to never emit a stop string."""

from __future__ import annotations


class StopStrings:
    def __init__(self, stops: tuple[str, ...] | list[str] = ()) -> None:
        self.stops = [s for s in stops if s]
        self.held = ""

    def push(self, delta: str) -> tuple[str, bool]:
        """Return (text safe to emit, whether a stop string was reached)."""
        if not self.stops:
            return delta, False
        buffer = self.held + delta
        hits = [i for i in (buffer.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.held = ""
            return buffer[: min(hits)], True
        keep = self._longest_partial_stop(buffer)
        self.held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep], False

    def flush(self) -> str:
        text, self.held = self.held, ""
        return text

    def _longest_partial_stop(self, text: str) -> int:
        """Length of the longest suffix of text that is a proper prefix of a stop string."""
        best = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if stop.startswith(text[-n:]):
                    best = n
                    break
        return best
