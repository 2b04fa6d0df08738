"""A generator run in a thread of its own: items in order, its error raised, closed before a close returns."""

import contextlib
import threading

import pytest

from core.background import in_background


def test_items_come_in_order_and_the_source_is_closed_at_the_end():
    closed = threading.Event()

    def source():
        try:
            yield from range(5)
        finally:
            closed.set()

    assert list(in_background(source())) == [0, 1, 2, 3, 4] and closed.is_set()


def test_an_error_of_the_source_is_raised_in_the_consumer():
    def source():
        yield 1
        raise ValueError("the index is gone")

    made = in_background(source())
    assert next(made) == 1
    with pytest.raises(ValueError, match="the index is gone"):
        next(made)


def test_leaving_early_stops_the_source_and_closes_it_before_the_close_returns():
    produced, closed = [], threading.Event()

    def source():
        try:
            for i in range(10_000):
                produced.append(i)
                yield i
                threading.Event().wait(0.01)  # a target pass
        finally:
            closed.set()  # where the pipeline releases the engine lock

    with contextlib.closing(in_background(source())) as made:
        assert next(made) == 0
    assert closed.is_set() and len(produced) < 100  # stopped after the item it was making
