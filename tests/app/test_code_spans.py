"""Inline code spans as CommonMark reads them: models copy reStructuredText's ``literals`` into answers."""

from pathlib import Path

from app.copilot.code_spans import inline_code, line_spans, prose, prose_so_far
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
    assert prose_so_far("and `` empty spans\nSet `x") == "and `` empty spans\nSet  "  # line_spans' own rule


def test_grounding_reads_double_backtick_spans_as_the_code_they_are():
    passages = ["multipart_chunksize - Default 8MB. Set it with max_bandwidth and 16MB parts."]
    items = {item.text: item for item in check_grounding(RST_ANSWER, passages)}
    assert {"multipart_chunksize", "16MB", "max_bandwidth"} <= set(items)
    assert all(items[text].found for text in ("multipart_chunksize", "16MB", "max_bandwidth"))
    assert not any("larger value" in text for text in items)  # no prose taken for code, nothing flagged


def test_a_line_still_being_written_has_its_last_span_open():
    def texts(line: str, still_open: bool) -> list[tuple[str, bool]]:
        return [(line[s.start : s.end], s.closed) for s in line_spans(line, still_open)]

    assert texts("Set ``a`` to `b` and ``scontrol re", True) == [("a", True), ("b", True), ("scontrol re", False)]
    assert texts("Set ``scontrol`", True) == [("scontrol", False)]  # its closing run half written
    assert texts("Set ``", True) == [("", False)]
    assert texts("and `` empty spans", True) == []  # literal backticks, not a span starting with a space
    assert texts("and `` empty spans", False) == texts("a ``b", False) == []  # a finished line: never closed


def test_the_nearest_source_command_in_a_double_backtick_literal_is_shown_without_its_backticks():
    passages = ["Run ``aws s3 cp localdir s3://bucket/ --recursive`` to copy a folder."]
    items = {i.text: i for i in check_grounding("```\naws s3 cp localdir s3://bucket/ --part-size 16MB\n```", passages)}
    item = items["aws s3 cp localdir s3://bucket/ --part-size 16MB"]
    assert not item.found and (item.nearest, item.nearest_source) == ("aws s3 cp localdir s3://bucket/ --recursive", 1)


def test_the_scanner_and_the_pattern_agree_on_every_closed_span():
    import random

    from app.copilot.code_spans import INLINE

    draw = random.Random(47)
    for _ in range(3000):
        line = "".join(draw.choice("``a b") for _ in range(draw.randint(0, 14)))
        by_pattern = [(m.start("code"), m.end("code")) for m in INLINE.finditer(line)]
        assert by_pattern == [(s.start, s.end) for s in line_spans(line) if s.closed], line


# a runbook's hard-wrapped Markdown, copied by the model as it stands (seen in the chat, session 57)
WRAPPED = (
    "If only the Stratum-1 fails, the client\n"
    "switches to the next server in `CVMFS_SERVER_URL` on its own. Check `cvmfs_talk -i atlas.cern.ch\n"
    "host info` to see which one it is using."
)


def test_a_code_span_cut_by_a_soft_wrap_is_one_span_as_commonmark_reads_it():
    from app.copilot.code_spans import joined_spans

    assert inline_code(WRAPPED) == ["CVMFS_SERVER_URL", "cvmfs_talk -i atlas.cern.ch host info"]
    assert "Check   to see" in prose(WRAPPED) and "`" not in prose(WRAPPED)
    joined = joined_spans(WRAPPED)
    assert len(joined) == len(WRAPPED) and joined.count("\n") == 1  # offsets hold: only the cut break is a space
    # a break a span cannot go on over: a blank line, a list item, a fence; and a fenced block's lines are code
    for apart in ("a `x\n\ny` b", "a `x\n- y` b", "a `x\n```\ny`\n```", "```\na `x\ny` b\n```"):
        assert joined_spans(apart) == apart, apart
    assert joined_spans("a `x\nb ``c`` d") == "a `x\nb ``c`` d"  # no run of as many backticks on the next line


def test_grounding_reads_a_wrapped_span_whole_and_takes_no_line_of_it_for_a_command():
    source = (Path(__file__).parents[2] / "corpora/runbooks/cvmfs-problems.md").read_text(encoding="utf-8")
    items = {item.text: item for item in check_grounding(WRAPPED, [source])}
    assert set(items) == {"CVMFS_SERVER_URL", "cvmfs_talk -i atlas.cern.ch host info"}
    assert all(item.found and not item.adapted for item in items.values())
