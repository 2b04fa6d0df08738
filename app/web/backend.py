"""The chat's server side below the page: background loading, stop flags and the feedback store.

The page must be up at once, so `Backend.start()` builds the bundled runbook index (first
start, default index only) and loads the models in a daemon thread while the web server
already serves; `state()` says what it is doing for the page's banner, and a question asked
meanwhile waits for it (`wait()`). A load that fails is kept as a message: every question
gets it, and the server keeps serving. One stop flag per browser session lets the stop
button end that session's running answer between two target passes.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from app.copilot import Copilot, CopilotOptions
from app.feedback import FeedbackStore, Vote
from core.errors import SpecragError


@dataclass(frozen=True)
class LoadState:
    phase: str  # "loading" | "ready" | "failed"
    message: str
    elapsed_s: float  # while loading: so far; once ready or failed: how long loading took


class Backend:
    def __init__(
        self,
        options: CopilotOptions,
        build_runbook_index: bool = False,
        feedback: FeedbackStore | None = None,
        loader: Callable[[CopilotOptions], Copilot] | None = None,
    ) -> None:
        self.options, self.build_runbook_index = options, build_runbook_index
        # the index and its embedding model open in a thread while the models load (~3 s sooner ready here)
        self.loader = loader or (lambda opts: Copilot.load(opts, open_index_first=True, need_index=False))
        self._feedback = feedback
        self._copilot: Copilot | None = None
        self._phase, self._message, self._started = "loading", "starting…", time.monotonic()
        self._ended: float | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._stop_flags: dict[str, threading.Event] = {}

    def start(self) -> Backend:
        threading.Thread(target=self._load, name="specrag-load", daemon=True).start()
        return self

    def _load(self) -> None:
        try:
            if self.build_runbook_index:
                from app.ingest_cmd import ensure_corpus_index

                self._set("building the bundled runbook index (first start only)…")
                ensure_corpus_index("runbooks", self.options.index_dir)
            models = self.options.models
            self._set(
                f"loading the models (target {models.target}, draft {models.draft or 'none'}) and opening the "
                "index; the first start converts the packaged models, which takes a few minutes…"
            )
            copilot = self.loader(self.options)
            with contextlib.suppress(SpecragError):  # e.g. no index at --index: each question says so
                copilot.retriever()  # the embedding model loads now, not on the first question (if not yet)
            self._set("preparing the system prompt (prefilled on a first start, loaded after)…")
            copilot.warm_up()  # so the first question pays only for its own tokens
            self._copilot = copilot
            self._set("ready", "ready")
        except Exception as err:  # any load failure becomes a message; the server keeps serving
            traceback.print_exc(file=sys.stderr)
            self._set(str(err) or type(err).__name__, "failed")
        finally:
            self._ready.set()

    def _set(self, message: str, phase: str = "loading") -> None:
        with self._lock:
            self._phase, self._message = phase, message
            if phase != "loading":
                self._ended = time.monotonic()
        print(f"specrag chat: {message}", file=sys.stderr, flush=True)

    def state(self) -> LoadState:
        with self._lock:
            end = time.monotonic() if self._ended is None else self._ended
            return LoadState(self._phase, self._message, end - self._started)

    def wait(self, timeout: float) -> bool:
        """True once loading has ended (ready or failed)."""
        return self._ready.wait(timeout)

    def copilot(self) -> Copilot:
        """The loaded copilot; a SpecragError with the load failure if loading failed."""
        state = self.state()
        if self._copilot is None:
            raise SpecragError(
                f"the models failed to load: {state.message}. Fix the cause and restart specrag chat"
                if state.phase == "failed"
                else "the models are still loading"
            )
        return self._copilot

    def describe(self) -> dict:
        return self._copilot.loaded.describe() if self._copilot else {}

    def stop_flag(self, session: str) -> threading.Event:
        with self._lock:
            return self._stop_flags.setdefault(session, threading.Event())

    def record_vote(self, vote: Vote) -> int:
        if self._feedback is None:
            self._feedback = FeedbackStore()
        return self._feedback.record(vote)
