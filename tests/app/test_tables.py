"""Markdown tables are read one way, GitHub's: a header only above a rule line, every line a row without one."""

from app.copilot.events import Passage
from app.copilot.splices import tables_of
from app.copilot.tables import Table, is_rule, tables_in
from app.copilot.thresholds import thresholds

WITH_HEADER = "| Check | WARNING |\n|:---|---:|\n| Cache disk | 85 % |\n| Hit ratio | < 70 %"
# a passage cut out of a longer table: no header, every line a row
CUT = "| Cache disk used | above 85 % | WARNING |\n| Cache disk used | above 95 % | CRITICAL |"


def test_a_header_is_the_line_above_a_rule_and_a_table_without_one_is_all_rows():
    assert tables_in(f"Thresholds:\n\n{WITH_HEADER}\n\nThen prose.\n\n{CUT}") == [
        Table(("Check", "WARNING"), (("Cache disk", "85 %"), ("Hit ratio", "< 70 %"))),
        Table(None, (("Cache disk used", "above 85 %", "WARNING"), ("Cache disk used", "above 95 %", "CRITICAL"))),
    ]
    assert is_rule("| --- | :-: |") and not is_rule("| - high | 5 |") and not is_rule("| |")


def test_both_checks_read_a_table_cut_from_a_longer_one_from_its_first_line():
    assert tables_of(CUT) == [
        [["Cache disk used", "above 85 %", "WARNING"], ["Cache disk used", "above 95 %", "CRITICAL"]]
    ]
    passage = Passage(1, CUT, "squid.md", "Squid Proxies", "Thresholds")
    (row,) = thresholds("the squid cache disk is at 90%, what now?", [passage])
    assert row.text == "Cache disk used · above 85 % · WARNING"  # its first line was once taken for a header
