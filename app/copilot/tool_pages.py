"""What an index's man pages say of their own tools, read once per index generation.

Three checks need a tool's whole page, not only the passages one question retrieved:
- the commands it takes (subcommands.tool_commands): `scontrol change` is no command of scontrol's;
- what each of its options does (definitions.py shows it beside the answer). Asked how to start a controller
  program on task 0 and workers on the others (fresh13, session 59), the model wrote `srun -N3 -l 0
  /bin/hostname` and said it did just that. The passages held a quick-start example with `-l`, not srun's
  entry for it, so nothing said what `-l` does: "Prepend task number to lines of stdout/err." From the
  tool's own page in the index it is shown, marked as coming from outside the passages.
- the settings a configuration file takes (config_files.py): `MaxJobsPerUser` is no slurm.conf setting.

A tool's option is taken only where its pages define it one way: an option whose entries say different
things (a name reused in another section) tells the operator nothing certain, so it is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.copilot.config_files import config_settings
from app.copilot.definitions import Entry, entries_of, is_option_name
from app.copilot.events import Passage
from app.copilot.subcommands import tool_commands


@dataclass(frozen=True)
class ToolPages:
    """`commands`: the commands each tool takes; `options`: each tool's options and format specifiers as its own
    page defines them ({tool: {name: entry}}, entries with `source` 0: not a passage); `settings`: every setting
    each configuration file's pages name, in lower case ({`slurm.conf`: ...})."""

    commands: Mapping[str, frozenset[str]] = field(default_factory=dict)
    options: Mapping[str, Mapping[str, Entry]] = field(default_factory=dict)
    settings: Mapping[str, frozenset[str]] = field(default_factory=dict)  # config_files.config_settings
    sections: Mapping[str, Mapping[str, Mapping[str, Entry]]] = field(default_factory=dict)  # tool_sections
    names: Mapping[str, Entry] = field(default_factory=dict)  # one_meaning_names


def read_tool_pages(chunks: Iterable[Any]) -> ToolPages:
    """The tool pages of an index's chunks (with text, title and heading)."""
    chunks = list(chunks)
    read = list(_tool_entries(chunks))  # read once for the options and the sections
    entries = [(entry, heading) for entry, heading in read if not entry.orphan]
    sections = tool_sections(entries)
    options = _with_lent_values(tool_options(entries), [entry for entry, _ in read if entry.orphan and not entry.text])
    names = one_meaning_names(sections, options)
    return ToolPages(tool_commands(chunks), options, config_settings(chunks), sections, names)


def _with_lent_values(options: dict[str, dict[str, Entry]], parents: Iterable[Entry]) -> dict[str, dict[str, Entry]]:
    """`options` with the values that chunks going on with an option's list lend it (definitions._labelled_parent):
    srun's `--cpu-bind` entry and its list of values (`verbose`, `cores` ...) lie in different chunks."""
    for parent in parents:
        for name in parent.names:
            held = options.get(parent.tool, {}).get(name)
            if held is not None:
                known = {term for _, term, _ in held.values}
                lent = tuple(value for value in parent.values if value[1] not in known)
                options[parent.tool][name] = replace(held, values=held.values + lent)
    return options


def tool_options(entries: Iterable[tuple[Entry, str]]) -> dict[str, dict[str, Entry]]:
    """{tool: {option or specifier: its entry}} over the entries of the pages titled by a command (`_tool_entries`),
    for the names each tool's pages define with one first sentence only."""
    found: dict[str, dict[str, Entry | None]] = {}
    for entry, _ in entries:
        own = found.setdefault(entry.tool, {})
        for name in filter(is_option_name, entry.names):
            _keep_one_meaning(own, name, entry)
    return _defined(found)


def tool_sections(entries: Iterable[tuple[Entry, str]]) -> dict[str, dict[str, dict[str, Entry]]]:
    """{tool: {section heading: {setting or subcommand: its entry}}} over the entries of the pages titled by a
    command (`_tool_entries`), for the names each section defines with one first sentence only. A name such as
    scontrol's `State` means one thing among a node's update specifications and another among a partition's:
    within a section it is one."""
    found: dict[str, dict[str, dict[str, Entry | None]]] = {}
    for entry, heading in entries:
        own = found.setdefault(entry.tool, {}).setdefault(heading, {})
        for name in (name for name in entry.names if not is_option_name(name)):
            _keep_one_meaning(own, name, entry)
    return {tool: sections for tool, by in found.items() if (sections := _defined(by))}


def one_meaning_names(
    sections: Mapping[str, Mapping[str, Mapping[str, Entry]]], options: Mapping[str, Mapping[str, Entry]] | None = None
) -> dict[str, Entry]:
    """{name: entry} for the settings, subcommands and variables that every section of every tool page defining them
    defines with one first sentence, and the long options that every tool defining them does: what a name means
    when nothing says which tool it belongs to (a bare `DefaultTime=1:00:00`, `SLURM_ARRAY_TASK_COUNT` in prose, a
    bare `--sockets-per-node=16`, which sbatch, salloc and srun each define as "Restrict node selection to nodes with
    at least the specified number of sockets."). A one-letter option means something else in every tool: never."""
    found: dict[str, Entry | None] = {}
    for by_heading in sections.values():
        for held in by_heading.values():
            for name, entry in held.items():
                _keep_one_meaning(found, name, entry)
    for held in (options or {}).values():
        for name, entry in held.items():
            if name.startswith("--"):
                _keep_one_meaning(found, name, entry)
    return {name: entry for name, entry in found.items() if entry is not None}


def _tool_entries(chunks: Iterable[Any]) -> Iterator[tuple[Entry, str]]:
    """(entry, its section heading) of every entry of the pages titled by a command, orphans included (a nested entry
    whose parent its chunk does not hold, and the parent its chunk's label names): which list an orphan belongs to,
    and so what its name means there, is unknown, so only the labelled parent's values are used (`read_tool_pages`)."""
    for chunk in chunks:
        heading = getattr(chunk, "heading", "") or ""
        passage = Passage(0, chunk.text, chunk.source, chunk.title, heading, 0.0, entry=getattr(chunk, "entry", ""))
        for entry in entries_of(passage):
            if entry.tool:
                yield entry, heading.strip()


def _keep_one_meaning(own: dict[str, Entry | None], name: str, entry: Entry) -> None:
    """Record `entry` for `name`; two entries of one name that say different things leave neither (None)."""
    held = own.get(name, entry)
    own[name] = replace(entry, names=frozenset({name})) if held and held.text == entry.text else None


def _defined(found: Mapping[Any, Mapping[str, Entry | None]]) -> dict[Any, dict[str, Entry]]:
    """`found` without the names left with no one meaning, and without keys left with no name."""
    kept = {key: {name: entry for name, entry in names.items() if entry is not None} for key, names in found.items()}
    return {key: names for key, names in kept.items() if names}
