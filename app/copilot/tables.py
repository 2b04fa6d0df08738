"""Markdown tables as the runbooks write them, read one way for every check that reads them.

A table is a run of lines that start with `|`; its first line is a header when a rule line (cells of dashes,
colons for alignment) follows it, as GitHub-flavoured Markdown reads one. A passage cut out of a longer
table has no header: then every line is a row. The thresholds (thresholds.py) and the table splices
(splices.py) both read tables through this.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_RULE_CELL = re.compile(r":?-+:?")
_MARKUP = re.compile(r"\*\*|__|`")  # bold and code marks, which a cell's words are read without


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...] | None  # the header's cells; None for a table without one
    rows: tuple[tuple[str, ...], ...]  # each data row's cells, stripped, markup kept


def is_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def cells(line: str) -> tuple[str, ...]:
    """A table line's cells, stripped (`| a | **b** |` -> ('a', '**b**'))."""
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def plain(text: str) -> str:
    """A cell's or a list item's words without bold or code marks (`**Less than 7 days**` -> 'Less than 7 days')."""
    return _MARKUP.sub("", text).strip()


def is_rule(line: str) -> bool:
    """Whether a table line is the rule under a header (`|---|:--:|`)."""
    parts = cells(line)
    return any(parts) and all(_RULE_CELL.fullmatch(part) for part in parts if part)


def table_at(lines: Sequence[str], start: int) -> tuple[Table, int]:
    """The table whose first line is `lines[start]`, and the index of the first line after it."""
    end = start
    while end < len(lines) and is_row(lines[end]):
        end += 1
    block = lines[start:end]
    header = cells(block[0]) if len(block) > 1 and is_rule(block[1]) else None
    rows = tuple(cells(line) for line in block[1 if header else 0 :] if not is_rule(line))
    return Table(header, rows), end


def tables_in(text: str) -> list[Table]:
    """Every table of `text`, in order."""
    lines, found, at = text.split("\n"), [], 0
    while at < len(lines):
        if is_row(lines[at]):
            table, at = table_at(lines, at)
            found.append(table)
        else:
            at += 1
    return found
