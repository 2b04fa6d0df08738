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
import ctypes
import logging
import threading

LOGGER = logging.getLogger("specrag.llama_cpp")
LEVELS = {0: logging.CRITICAL, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
CONT = 5  # ggml.h: continues the previous message at its level

_lock = threading.Lock()
_state = {"level": logging.INFO, "pending": "", "interrupted": False}
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
        try:
            on_log(level, text)
        except KeyboardInterrupt:  # ctypes would print and drop it: raised once llama.cpp returns
            _state["interrupted"] = True

    _callback = callback
    bindings.llama_log_set(callback, ctypes.c_void_p(0))


def raise_if_interrupted() -> None:
    """Raise the Ctrl-C that arrived while llama.cpp was logging (a model load logs hundreds of lines).

    Python runs a signal's handler between bytecodes, so a KeyboardInterrupt can be raised inside the
    log callback, where ctypes prints "Exception ignored" and carries on: the load went on as if
    nothing had been pressed. Callers check after each llama.cpp call that logs."""
    if _state["interrupted"]:
        _state["interrupted"] = False
        raise KeyboardInterrupt


def why_failed() -> str:
    """llama.cpp's last error lines, for an error message ("" when it logged none)."""
    return "; ".join(recent_errors)
