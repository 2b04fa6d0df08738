"""Run a generator in a thread of its own, so a slow consumer never holds up its producer.

The copilot's answer stream decodes one target pass per event. A front end that does network
I/O between two events (Slack: `chat.appendStream`, `chat.update`, `assistant.threads.setStatus`,
each a round trip) stalls decoding for that long when it iterates the stream itself. Iterated
through `in_background`, the stream runs ahead in its thread and the consumer takes what has
piled up whenever it is ready.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import TypeVar

T = TypeVar("T")
_ENDED = object()  # the producer is done and its generator closed


def in_background(items: Iterator[T], name: str = "background") -> Generator[T, None, None]:
    """The items of `items`, produced in a thread of its own; an error it raises is raised here.

    Closing this generator (or leaving a `with contextlib.closing(...)` block) stops the producer
    after the item it is making and waits until it has closed `items`, so whatever `items` holds
    (the engine lock) is free when the close returns."""
    handed: queue.SimpleQueue = queue.SimpleQueue()
    cancel = threading.Event()
    producer = threading.Thread(target=_produce, args=(items, handed, cancel), name=name, daemon=True)
    producer.start()
    try:
        while (item := handed.get()) is not _ENDED:
            if isinstance(item, _Raised):
                raise item.error
            yield item
    finally:
        cancel.set()
        producer.join()


class _Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _produce(items: Iterator[T], handed: queue.SimpleQueue, cancel: threading.Event) -> None:
    try:
        for item in items:
            handed.put(item)
            if cancel.is_set():
                break
    except BaseException as err:  # handed over: the consumer's thread raises it
        handed.put(_Raised(err))
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()
        handed.put(_ENDED)
