"""What the sources say each option of the answer does: a real option used for the wrong purpose.

The grounding check finds invented commands. The commonest wrong answer left on questions no
setting was fitted to is another kind: a real option or setting, found verbatim in a source,
used for something it does not do (`--time-min` for a start time, `-M` of scontrol, which
names a cluster, as a node count, `InactiveLimit` for a per-user job limit; session 24). No
check can tell that from the text. An operator can, in a second, when the source's own
definition stands beside the option. So for every option, setting or subcommand of the
answer's code that a passage defines, this gives the first sentence of that definition; then
for each setting the answer's prose names and each option, setting or code the question names
(`QOSMaxJobsPerUserLimit`: the definition the answer should have given).

Man pages and configuration references are definition lists, which the HTML reader writes as
an entry line and its description line (`- -M, --clusters=<string>` then `- The cluster to
issue commands to. ...`); lists of reason codes are "Name — description" lines. An entry's
names are the words before `=`, `[` or a space of each comma-separated form; a token of the
answer's code is looked up by those names. A one-letter option means something else in every
tool: it is explained only from a passage of the command's own tool (the page titled by the
line's first word), and not at all without one.

A man page's format specifiers are entries too (`squeue -o`'s `%S`, "Actual or expected start time of the job or
job step."): asked for a format string showing "job id, user, state and reason", an answer wrote `%i %u %S %R`
and said `%S` was the state (session 58, in the chat). A specifier means something else in every tool (`%S` of
sinfo is "Allowed allocating nodes"), so like a one-letter option it is explained only from its tool's page: the
line's command, or the one page that defines it among the passages.

An entry may list its values as a nested definition list (scontrol's `State=<state>`: `DOWN`,
"Stop all running and suspended jobs and make the node unavailable for new jobs."; `DRAIN`, ...).
Then a `Key=VALUE` of the answer's code also gets the definition of its value, right after the
key's: asked to stop new jobs on a node while the running ones finish, an answer wrote
`scontrol update NodeName=name State=DOWN` and said running jobs would go on (session 26); the key's
own first sentence, "Assign one of the following states/actions...", showed nothing of that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.copilot.code_spans import options, prose
from app.copilot.events import Definition, GroundingItem, Passage

MAX_SHOWN = 6  # options explained per answer; more reads as a second answer
MAX_CHARS = 160  # a definition's first sentence is cut here

# a definition list's entry line and description line, or a one-line "Name — description" (reason codes)
_ENTRY = re.compile(r"^- (?P<term>[^\n]{1,80})\n- (?P<text>[^\n]+)|^(?P<name>[A-Za-z][\w.-]*) — (?P<line>[^\n]+)", re.M)
# the lines a man page's reader wrapped a description over ("... dependencies have been\nsatisfied completed."):
# up to a blank line, the next entry or a nested list (indented)
_WRAPPED = re.compile(r"(?:\n(?![ \t]|- )[^\n]+)+")
# an empty item before a description ("- threads", "-", "- Automatically")
_LEADING_DASHES = re.compile(r"^\s*(?:-\s+)*")
# a nested entry anywhere: its term's line at any indent (a chunk may cut the first one's), its description indented
_NESTED = re.compile(r"^[ \t]*- (?P<term>[^\n]{1,80})\n[ \t]+- (?P<text>[^\n]+)", re.M)
# the values of an entry, as a definition list nested under its description (indented; blank lines between)
_VALUE = re.compile(r"\n*(?P<indent>[ \t]+)- (?P<term>[^\n]{1,80})\n(?P=indent)- (?P<text>[^\n]+)")
_TOKEN = re.compile(r"--?[A-Za-z][\w-]*|[A-Za-z][\w.-]*")  # an option or a name: up to '=', '[', '<', a space or ',
_SHORT = re.compile(r"-[A-Za-z]")
_LONG = re.compile(r"--[A-Za-z]")
_BARE = re.compile(r"[A-Za-z][\w-]*")
# an entry's term: up to four words, no sentence ("Execute ResumeProgram with ... names.") and no "Name: text" line
_TERM = re.compile(r"(?!.*(?: — |: |[.,:]$))\S+(?: \S+){0,3}")
_OPTION_START = re.compile(r"--?[A-Za-z]")
_COMMAND = re.compile(r"[a-z][a-z0-9_.-]*")  # a command's name, as a man page's title gives it
_SENTENCE_END = re.compile(r"(?<=[A-Za-z0-9)\]>][.!?])\s+(?=[A-Z(\"'])")
_CODE_KINDS = ("code", "command", "option")
# a setting, reason or state named in prose: a word with two capitals or more and a small letter (InactiveLimit,
# QOSMaxJobsPerUserLimit) or an underscore (OUT_OF_MEMORY), not an acronym (ID, CPU); the question may also name a
# code of four capitals or more (DRAIN). Either counts only where an entry of the sources is headed by that name.
SETTING = re.compile(r"(?<![\w-])(?=(?:[a-z0-9_]*[A-Z]){2})(?=\w*[a-z_])[A-Za-z]\w*(?![\w-])")
# a configuration key among them: CamelCase (MaxJobCount) or with an underscore (CVMFS_TIMEOUT), not a plural
# acronym (GPUs); the withheld-value rule (withhold.py) and the setting-value specific (specifics.py) share it
CONFIG_KEY = re.compile(r"(?=\w*(?:[a-z][A-Z]|_))" + SETTING.pattern)
_STATE_CODE = re.compile(r"(?<![\w-])[A-Z][A-Z0-9_]{3,}(?![\w-])")
# a two-letter code the question asks about (squeue's `CF`, `NF`): explained where a passage's entry is headed by it.
# Asked what `CF` means, an answer gave `CG`'s description (fresh16, session 60); CF's own now stands beside it
_SHORT_CODE = re.compile(r"(?<![\w-])[A-Z]{2}(?![\w-])")
# a format specifier's entry ("- %S" then "- Actual or expected start time ..."), at any indent; and one in use,
# with its field width ("%.18i", "%-10u")
_SPECIFIER_ENTRY = re.compile(r"^[ \t]*- (?P<spec>%[A-Za-z])[ \t]*\n[ \t]*- (?P<text>[^\n]+)", re.M)
_SPECIFIER = re.compile(r"(?<!%)%[-.\d]*([A-Za-z])")


@dataclass(frozen=True)
class Entry:
    """One entry of a passage's definition list: an option, setting or code and what it does."""

    names: frozenset[str]
    term: str
    text: str  # the description's first sentence (first_sentence)
    source: int
    title: str
    tool: str  # the passage's page title when it names a command (`scontrol`), else ''
    values: tuple[tuple[frozenset[str], str, str], ...] = ()  # (names, term, first sentence) of each listed value
    description: str = ""  # the whole description line
    orphan: bool = False  # a nested entry whose parent the passage does not hold (_orphans)


def defined_options(
    grounding: Sequence[GroundingItem],
    passages: Sequence[Passage],
    answer: str = "",
    question: str = "",
    pages: Mapping[str, Mapping[str, Entry]] | None = None,
    sections: Mapping[str, Mapping[str, Mapping[str, Entry]]] | None = None,
    names: Mapping[str, Entry] | None = None,
) -> list[Definition]:
    """The definitions passages give of the options, settings and subcommands in the answer's code,
    then of the settings its prose names (`InactiveLimit`: a word with two capitals or more), then
    of the options and settings the question names (the `QOSMaxJobsPerUserLimit` it asks about).

    In that order, each name once, at most MAX_SHOWN. A name is taken from a found item only:
    an invented one is already flagged, and its lookalike's definition would lend it credit.
    A name in prose needs no check: it is looked up among the entries' names.

    An option or format specifier of a line whose tool no passage defines it for is looked up in `pages`, the
    tool's own pages in the index ({tool: {name: entry}}: tool_pages.py), and shown with source 0; a setting or
    subcommand in `sections` ({tool: {heading: {name: entry}}}), in the one section of the tool's page that defines
    the most of the line's names, two at least (`scontrol update NodeName=... State=DOWN`: the nodes' update
    specifications, where `State` is a node's). A setting, variable or state code of no tool's line (a bare
    `DefaultTime=1:00:00`, a name in prose) that no passage defines is looked up in `names`, those every tool page
    defining them defines one way (tool_pages.one_meaning_names): asked which variable holds a job's task count, an
    answer gave `SLURM_ARRAY_TASK_COUNT`, which no passage defined and the pages define as "Total number of tasks
    in a job array." (fresh14, session 60). So is a long option of no tool's line: asked how to make every node
    have at least 16 CPUs, an answer gave a bare `--sockets-per-node=16` and said it did that (fresh17, session 61);
    sbatch, salloc and srun all define it as restricting nodes to those with that many sockets."""
    entries = [entry for passage in passages for entry in entries_of(passage)]
    pages, sections, names = pages or {}, sections or {}, names or {}
    if not entries and not pages and not sections:
        return []
    used = [_names_used(item) for item in grounding if item.found and item.kind in _CODE_KINDS]
    in_code = len(used)  # the names of found code come first: a bare word there may be an option's value
    # a specifier's meaning lends an invented line no credit: it says what the letter prints, found or not
    used += [_specifiers_used(item) for item in grounding if item.kind in _CODE_KINDS]
    used.append(("", [(name, "") for name in SETTING.findall(prose(answer))]))
    asked = [
        *options(question),
        *SETTING.findall(question),
        *_STATE_CODE.findall(question),
        *_SHORT_CODE.findall(question),
    ]
    used.append(("", [(name, "") for name in asked]))
    shown: dict[str, Definition] = {}
    for at, (tool, named) in enumerate(used):
        section = _section_of([name for name, _ in named], sections.get(tool, {}))
        for name, value in named:
            entry = entry_for(name, tool, entries) or pages.get(tool, {}).get(name) or section.get(name)
            if (
                entry is None
                and not tool
                and (CONFIG_KEY.fullmatch(name) or _STATE_CODE.fullmatch(name) or _LONG.match(name))
            ):
                # a setting, variable, state code or long option, not a file name or a plural (CPUs)
                entry = names.get(name)
            if entry is None and at < in_code and (listed := _listed_as_value(name, entries)) is not None:
                shown.setdefault(name, Definition(name, *listed))
            if entry is not None:
                shown.setdefault(name, Definition(name, entry.term, entry.source, entry.title, entry.text))
            # its value, from its entry's list or from a passage that goes on with that list without it; a passage's
            # before the index's pages (source 0), so that the operator is sent to the passage
            parents = [entry] if entry is not None else []
            parents += [held for held in entries if not held.text and name in held.names]
            parents.sort(key=lambda held: held.source == 0)
            if value and (meaning := next(filter(None, (_value_of(held, value) for held in parents)), None)):
                shown.setdefault(f"{name}={value}", Definition(f"{name}={value}", *meaning))
            if len(shown) >= MAX_SHOWN:
                return list(shown.values())[:MAX_SHOWN]
    return list(shown.values())


def _listed_as_value(name: str, entries: Sequence[Entry]) -> tuple[str, int, str, str] | None:
    """(term, source, title, first sentence) of the value named `name` (any case) that the passages' entries list,
    where they list it one way. Asked to put job 88123 in front of the user's other pending jobs, an answer ran
    `scontrol requeuehold Incomplete 88123`; `Incomplete` is one of requeuehold's values, "Operate only on jobs (or
    tasks of a job array) which have not completed.", which says nothing of an order (own-values probe, session 60)."""
    said = {
        (term, entry.source, entry.title, text)
        for entry in entries
        for _, term, text in entry.values
        if (head := _BARE.match(term)) is not None and head.group().upper() == name.upper()
    }
    return min(said) if len({text for *_, text in said}) == 1 else None


def _section_of(names: Sequence[str], sections: Mapping[str, Mapping[str, Entry]]) -> Mapping[str, Entry]:
    """The entries of the one section that defines the most of `names`, two at least; {} when none or two do."""
    counts = sorted(
        ((sum(name in held for name in names), heading) for heading, held in sections.items()), reverse=True
    )
    if not counts or counts[0][0] < 2 or (len(counts) > 1 and counts[1][0] == counts[0][0]):
        return {}
    return sections[counts[0][1]]


def is_option_name(name: str) -> bool:
    """Whether `name` is an option (`-l`, `--label`) or a format specifier (`%S`): what a tool's page defines for
    that tool alone."""
    return bool(_OPTION_START.match(name) or re.fullmatch(r"%[A-Za-z]", name))


def _value_of(entry: Entry, value: str) -> tuple[str, int, str, str] | None:
    """(term, source, title, first sentence) of the entry's listed value `value` (any case, as Slurm reads
    values: `State=down` is `DOWN`), if it lists one."""
    for names, term, text in entry.values:
        if value.upper() in names:
            return term, entry.source, entry.title, text
    return None


def entries_of(passage: Passage) -> Iterable[Entry]:
    title = (passage.title or "").strip()
    tool = title if _COMMAND.fullmatch(title) else ""
    for match in _SPECIFIER_ENTRY.finditer(passage.text):
        spec, text = match.group("spec"), match.group("text")
        yield Entry(frozenset({spec}), spec, first_sentence(text), passage.number, title, tool, (), text)
    covered: list[tuple[int, int]] = []  # where the nested lists read as entries' values lie
    for match in _ENTRY.finditer(passage.text):
        term = (match.group("term") or match.group("name")).strip()
        text = (match.group("text") or match.group("line")).removeprefix("- ")
        # not an entry: a list of sentences or of "Name: text" lines, or an undescribed term before the next one
        if not _TERM.fullmatch(term) or _OPTION_START.match(text) or " " not in text.strip():
            continue
        names = _entry_names(term)
        if names:
            end = match.end()
            if match.group("text") and (wrapped := _WRAPPED.match(passage.text, end)):
                text, end = " ".join([text, *wrapped.group().split()]), wrapped.end()
            values, listed_to = _values(passage.text, end)
            covered.append((end, listed_to))
            yield Entry(names, term, first_sentence(text), passage.number, title, tool, values, text)
    orphans = list(_orphans(passage, covered, title, tool))
    yield from orphans
    if orphans and (parent := _labelled_parent(passage, orphans, title, tool)) is not None:
        yield parent


def _labelled_parent(passage: Passage, orphans: Sequence[Entry], title: str, tool: str) -> Entry | None:
    """The entry a passage's orphans are the values of, where its chunk's label names it (`passage.entry`: a chunk
    that goes on with slurm.conf's `SchedulerParameters` list holds `bf_window`, `bf_continue` ... without the key):
    an entry with no description of its own, which lends its values only."""
    names = _entry_names(passage.entry)
    if not names or not _TERM.fullmatch(passage.entry.strip()):
        return None
    values = tuple((_value_names(orphan.term), orphan.term, orphan.text) for orphan in orphans)
    return Entry(names, passage.entry.strip(), "", passage.number, title, tool, values, "", orphan=True)


def _orphans(passage: Passage, covered: Sequence[tuple[int, int]], title: str, tool: str) -> Iterable[Entry]:
    """The nested entries whose parent the passage does not hold, each as an entry of its own: a chunk that starts
    inside squeue's list of `--Format` fields holds `PendingTime`, "The time (in seconds) between start time and
    submit time of the job.", which an answer gave as `EligibleTime`'s meaning (fresh15, session 60). The chunker
    may have cut the first one's indent ("- Partition" then "    - Partition of the job ...")."""
    for match in _NESTED.finditer(passage.text):
        if any(start <= match.start() < stop for start, stop in covered):
            continue
        term, text = match.group("term").strip(), _LEADING_DASHES.sub("", match.group("text"))
        if not _TERM.fullmatch(term) or _OPTION_START.match(text) or " " not in text.strip():
            continue
        names = _entry_names(term)
        if names:
            yield Entry(names, term, first_sentence(text), passage.number, title, tool, (), text, orphan=True)


def _values(text: str, at: int) -> tuple[tuple[tuple[frozenset[str], str, str], ...], int]:
    """The nested entries right after an entry's description (at `at`): each value's names (upper case), term and
    first sentence, while the indented list goes on; and where the list ends."""
    values = []
    while (match := _VALUE.match(text, at)) is not None:
        term, at = match.group("term").strip(), match.end()
        names = _value_names(term)
        if names:
            values.append((names, term, first_sentence(_LEADING_DASHES.sub("", match.group("text")))))
    return tuple(values), at


def _entry_names(term: str) -> frozenset[str]:
    """The names an entry's term gives, over its comma-separated forms (`-l, --label`)."""
    return frozenset(name for form in term.split(",") for name in _names_of(form.strip()) if len(name) > 1)


def _value_names(term: str) -> frozenset[str]:
    """The names a listed value's term gives, upper case as Slurm reads values (`[no]verbose`: NO, VERBOSE)."""
    return frozenset(word.upper() for form in term.split(",") for word in _BARE.findall(form))


def _names_of(form: str) -> list[str]:
    """The names one form of an entry's term gives: its first word up to '=', '[', '<' or a space
    (`--clusters=<string>`, `suspend <job_list>`), or, in a form made of bare words only, each word
    with a capital (`OOM OUT_OF_MEMORY`, a state's short and long code; `AccountUtilizationByUser`
    of `cluster AccountUtilizationByUser`, where `cluster` heads many reports)."""
    words = form.split()
    if len(words) > 1 and all(_BARE.fullmatch(word) for word in words):
        return [word for word in words if not word.islower()]
    name = _TOKEN.match(form)
    return [name.group(0)] if name else []


def _names_used(item: GroundingItem) -> tuple[str, list[tuple[str, str]]]:
    """The tool a code item runs ('' if none) and its option, setting and word names, in order, each with the
    word it is set to ('' if none).

    `scontrol update JobId=<job_id> State=DOWN` runs `scontrol` and uses `update`, `JobId` (set to a
    placeholder, '') and `State` (set to `DOWN`, which an entry may list among its values). A value with arguments
    after a colon is set to its name: `--dependency=afterok:123` to `afterok`, which srun's entry lists as "This job
    can begin execution after the specified jobs have successfully executed", where an answer said it ran the job
    when they failed (fresh14, session 60)."""
    tool, words = _tool_and_words(item)
    used: dict[str, str] = {}
    for word in words:
        key, _, value = word.partition("=")
        if _TOKEN.fullmatch(key) and key not in used:
            bare = value.strip("\"'")  # State="DOWN" reads as State=DOWN
            # a value with its arguments: `afterok` of `--dependency=afterok:123`, `bf_window` of `bf_window=2880`
            head = re.split(r"[:=]", bare, maxsplit=1)[0]
            used[key] = bare if _BARE.fullmatch(bare) else head if head != bare and _BARE.fullmatch(head) else ""
    return tool, list(used.items())


def _specifiers_used(item: GroundingItem) -> tuple[str, list[tuple[str, str]]]:
    """The tool a code item runs ('' if none) and the format specifiers it writes (`%S` of `"%.18i %S"`)."""
    tool, _ = _tool_and_words(item)
    return tool, [(f"%{letter}", "") for letter in dict.fromkeys(_SPECIFIER.findall(item.text))]


def _tool_and_words(item: GroundingItem) -> tuple[str, list[str]]:
    """The tool a code item runs (its first word when a command's name starts a line of two words or more, else
    the item's own tool) and the words after it."""
    words = item.text.split()
    if len(words) > 1 and _COMMAND.fullmatch(words[0]):
        return words[0], words[1:]
    return item.tool, words


def entry_for(name: str, tool: str, entries: Sequence[Entry]) -> Entry | None:
    """The definition of `name`: from the line's own tool's page first; a one-letter option only from there."""
    holding = [entry for entry in entries if name in entry.names and entry.text]  # not a labelled parent's
    own = [entry for entry in holding if tool and entry.tool == tool]
    if own:
        return own[0]
    if name.startswith("%"):  # a format specifier: its tool's, or the one page's that defines it here
        pages = {entry.tool for entry in holding}
        return holding[0] if not tool and len(pages) == 1 and "" not in pages else None
    if _SHORT.fullmatch(name):
        return None
    # a long option or a setting names the same thing across pages (srun's and sbatch's --time-min);
    # the definition shown carries its page's title either way
    return holding[0] if holding else None


def first_sentence(text: str, width: int = MAX_CHARS, least: int = 40) -> str:
    """The first sentence of a description, with the next ones while it is shorter than `least` characters
    ("Format is <job(.step)>." says nothing alone), cut to `width` characters."""
    sentences = _SENTENCE_END.split(text.strip())
    shown = sentences[0]
    for sentence in sentences[1:]:
        if len(shown) >= least:
            break
        shown += " " + sentence
    return shown if len(shown) <= width else shown[: width - 1].rstrip() + "…"
