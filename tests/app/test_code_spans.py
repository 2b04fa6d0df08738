"""Inline code spans as CommonMark reads them: models copy reStructuredText's ``literals`` into answers."""

from app.copilot.code_spans import inline_code, prose, prose_so_far
from app.copilot.grounding import check_grounding

RST_ANSWER = "[3] Set ``multipart_chunksize`` to a larger value, such as ``16MB``, or `max_bandwidth`."


def test_a_span_closes_only_on_a_run_of_as_many_backticks():
    assert inline_code(RST_ANSWER) == ["multipart_chunksize", "16MB", "max_bandwidth"]
    assert inline_code("Use `` `date` `` or ``a`b``.") == ["`date`", "a`b"]  # shorter runs are text inside
    assert inline_code("an opening `` left open, then `x`") == ["x"]


def test_the_text_between_double_backtick_spans_is_prose():
    assert " to a larger value, such as " in prose(RST_ANSWER) and "16MB" not in prose(RST_ANSWER)
    assert prose_so_far("Set ``multipart_chu") == "Set  "  # a span still being written is code
    assert prose_so_far("Set ``a`` to ``b") == "Set   to  "


def test_grounding_reads_double_backtick_spans_as_the_code_they_are():
    passages = ["multipart_chunksize - Default 8MB. Set it with max_bandwidth and 16MB parts."]
    items = {item.text: item for item in check_grounding(RST_ANSWER, passages)}
    assert {"multipart_chunksize", "16MB", "max_bandwidth"} <= set(items)
    assert all(items[text].found for text in ("multipart_chunksize", "16MB", "max_bandwidth"))
    assert not any("larger value" in text for text in items)  # no prose taken for code, nothing flagged
