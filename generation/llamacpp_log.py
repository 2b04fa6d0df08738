"""llama.cpp's log, routed into Python logging with its real levels.

llama-cpp-python 0.3.x installs a callback that maps llama.cpp's levels by an old enum
(3 -> ERROR), while the ggml.h it ships numbers them NONE 0, DEBUG 1, INFO 2, WARN 3,
ERROR 4, CONT 5. Its warnings therefore reached every `specrag ask` as errors, e.g.
"control-looking token ... this is probably a bug in the model", a harmless note on the
packaged Qwen GGUF. Here each finished line goes to the `specrag.llama_cpp` logger at its
real level, and the last error lines are kept: specrag's own error for a failed load or
decode quotes them. Nothing reaches stderr by itself unless the user lowers the logger's
level (logging.getLogger("specrag.llama_cpp").setLevel(logging.WARNING)).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import signal
import threading
from collections.abc import Iterator

LOGGER = logging.getLogger("specrag.llama_cpp")
LEVELS = {0: logging.CRITICAL, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
CONT = 5  # ggml.h: continues the previous message at its level

_lock = threading.Lock()
_state = {"level": logging.INFO, "pending": ""}
recent_errors: collections.deque[str] = collections.deque(maxlen=4)
_callback = None  # the ctypes callback, kept alive for as long as llama.cpp may call it


def on_log(level: int, text: bytes | str) -> None:
    """Handle one piece of llama.cpp's log; a message may arrive in pieces, lines end with a newline."""
    chunk = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    with _lock:
        if level != CONT:
            _state["level"] = LEVELS.get(level, logging.INFO)
        python_level = _state["level"]
        *lines, _state["pending"] = (_state["pending"] + chunk).split("\n")
    for line in filter(None, (line.rstrip() for line in lines)):
        if python_level >= logging.ERROR:
            recent_errors.append(line)
        LOGGER.log(python_level, "%s", line)


def route_llama_log() -> None:
    """Install the callback once per process; llama.cpp's own lines stay out of sight (see above)."""
    global _callback
    if _callback is not None:
        return
    from llama_cpp import llama_cpp as bindings

    if LOGGER.level == logging.NOTSET:
        LOGGER.setLevel(logging.CRITICAL + 1)

    @bindings.llama_log_callback
    def callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        on_log(level, text)

    _callback = callback
    bindings.llama_log_set(callback, ctypes.c_void_p(0))


@contextlib.contextmanager
def ctrl_c_after() -> Iterator[None]:
    """Hold Ctrl-C back during a llama.cpp call that logs (a model load logs hundreds of lines), and raise
    it when the call returns.

    Python runs a signal's handler between bytecodes, so the KeyboardInterrupt of a Ctrl-C pressed during
    a load was raised in the log callback, where ctypes prints "Exception ignored" and carries on: `ask`
    went on loading and answered. Meanwhile a handler that only notes the press is in place. Only the
    main thread can set one; where SIGINT is ignored or left to the system, nothing changes."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    pressed: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        previous(signal.SIGINT, None)  # Python's own handler raises KeyboardInterrupt


def why_failed() -> str:
    """llama.cpp's last error lines, for an error message ("" when it logged none)."""
    return "; ".join(recent_errors)
