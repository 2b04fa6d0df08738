"""`specrag ask`'s search, run in a short-lived child process so the answering process never imports
the retrieval stack.

Opening the index loads torch, transformers (the query embedder), FAISS and bm25s with SciPy; once
imported they stay mapped for the life of the process, even once the index is let go, and kept
`ask`'s peak RSS well above the weights (README, session 25). A spawned child (not forked: the parent
may already hold torch's and OpenMP's threads) opens the index, searches as `Copilot.retrieve_for`
does, sends back the passages and the index's embedding model id (the relevance gate's threshold
belongs to it) and exits, taking all of that with it. `ask` loads the models once it has exited
(app/ask.py), so the two never hold their memory at the same time.

    with SearchProcess(options, question, k) as search:  # a missing index is reported here, at once
        passages, embedding_model = search.result()
    copilot = Copilot.load(options)

This module imports nothing heavy: the child imports the retrieval stack itself.
"""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import threading
import traceback
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType

from app.copilot.events import Passage
from app.copilot.options import CopilotOptions
from app.copilot.tool_pages import ToolPages
from core.errors import SpecragError

JOIN_SECONDS = 5.0  # how long a finished child gets to exit before it is terminated


class SearchProcessError(SpecragError):
    """The search process died before it sent its passages (killed, out of memory, crashed)."""


class SearchProcess:
    """A search of the index running in a spawned child; `result()` waits for it.

    The index is checked first, in this process (retrieval.store is light to import), so a missing
    or broken one is reported in a second, before any models load. Use it as a context manager (or
    call `close`): a parent that gives up early (a model that fails to load, Ctrl-C) ends the child
    instead of waiting for its search."""

    def __init__(self, options: CopilotOptions, question: str, k: int) -> None:
        from retrieval.store import default_index_dir, require_live

        require_live(options.index_dir or default_index_dir())
        context = multiprocessing.get_context("spawn")
        self._receiver, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_search, args=(sender, options, question, k), name="specrag-search", daemon=True
        )
        _start_without_ctrl_c(self._process)
        sender.close()  # the child holds the only sending end now: its death reads as EOF here
        self._reply: tuple | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def result(self) -> tuple[list[Passage], str | None]:
        """The passages (as `Copilot.retrieve_for` finds them) and the index's embedding model id.
        An error of the search is raised here as the child raised it; a child that died, as a
        SearchProcessError."""
        if self._reply is None:
            try:
                self._reply = self._receiver.recv()
            except EOFError:
                self._process.join(JOIN_SECONDS)
                raise SearchProcessError(
                    f"the search process died ({_exit_reason(self._process.exitcode)}) before it found the "
                    "passages; run the command again"
                ) from None
            finally:
                self.close()
            if self._reply[0] == "error" and not isinstance(self._reply[1], SpecragError):
                self._reply[1].add_note(f"in the search process:\n{self._reply[2]}")  # a bug: show where it was
        if self._reply[0] == "error":
            raise self._reply[1]
        _, passages, embedding_model, _ = self._reply
        return passages, embedding_model

    @property
    def pages(self) -> ToolPages:
        """What the index's tool pages say (tool_pages.py), once `result()` returned."""
        return self._reply[3] if self._reply is not None and self._reply[0] == "passages" else ToolPages()

    def close(self) -> None:
        """End the child (if it still runs) and release its pipe."""
        self._receiver.close()
        if self._process.is_alive():
            self._process.join(JOIN_SECONDS if self._reply is not None else 0)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()

    def __enter__(self) -> SearchProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def search_apart(options: CopilotOptions, question: str, k: int) -> tuple[list[Passage], str | None]:
    """`Copilot.retrieval_only(options).retrieve_for(question, (), k)[0]` and the index's embedding
    model id, computed in a child process (see the module's docstring)."""
    with SearchProcess(options, question, k) as search:
        return search.result()


def _search(sender: Connection, options: CopilotOptions, question: str, k: int) -> None:
    """The child: search, send ("passages", passages, model id, tool pages) or ("error", exception, traceback)."""
    try:
        from app.copilot.pipeline import Copilot

        copilot = Copilot.retrieval_only(options)
        passages, _ = copilot.retrieve_for(question, (), k)
        reply: tuple = ("passages", passages, copilot.embedding_model, copilot.tool_pages())
    except Exception as err:
        reply = ("error", _portable(err), traceback.format_exc())
    sender.send(reply)
    sender.close()


def _start_without_ctrl_c(process: BaseProcess) -> None:
    """Start the child with SIGINT ignored, which it keeps across exec: Ctrl-C is the parent's to handle
    (it ends the child on its way out), and a child interrupted too would print a traceback of its own,
    from wherever its imports were. Only the main thread may set a signal handler."""
    if threading.current_thread() is not threading.main_thread():
        process.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def _portable(error: Exception) -> Exception:
    """`error` if it comes back from pickling as itself, else one that does with the same message: an
    exception whose constructor takes other arguments than its message cannot be unpickled."""
    try:
        copy = pickle.loads(pickle.dumps(error))
        if type(copy) is type(error) and str(copy) == str(error):
            return error
    except Exception:  # any failure to round-trip means: send a plain copy
        pass
    if isinstance(error, SpecragError):
        return SpecragError(str(error))
    return RuntimeError(f"{type(error).__name__}: {error}")


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "it did not exit"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
