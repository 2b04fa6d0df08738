"""Grounding check: is each command, option, path, code span and specific of an answer in the sources?

An operator may run what the answer shows, so every such item is listed and marked found
or not found *verbatim* in the passages the model was given (whitespace-normalised,
case-sensitive: `--Nodes` is not `--nodes`). A code or command line, or an option, also counts
as found when it is built from one single passage and the user's own values:
- its pieces are its words split at `=`, `:` and `,` (`--gpus-per-node=volta:2` is the name
  `--gpus-per-node` and the values `volta` and `2`);
- every name (the first word, an option, a setting's key) must be a piece of that passage;
- every other piece too, unless it is the user's: a number, range, size or time, a
  `<placeholder>`, or a value the question names (`NodeName=c042` when the question asks about c042;
  a quoted `Reason="ECC memory warnings"` the question writes is one such value).
A lone value the question names (`c042` in backticks) is found too: it is the user's own, not a claim.
So `sbatch --array=0-15%4 -N1 tmp` (a source's `$ sbatch --array=0-31 -N1 tmp` with the throttle
asked for) and `srun --gpus-per-node=volta:2` (a source has `volta:3`) are found, while
`sbatch --afterok=123` (no source has the option `--afterok`) is not. Such items are marked
`adapted`; flagging them had taught operators to ignore flags.
Items:
- code: each line of a fenced block and each inline `code` span (a leading `$ ` dropped), except
  a bare `<placeholder>` ("replace `<job_id>` with the job's id"), which is the user's to fill in;
- command: a line outside code that reads like a shell command (`$ cmd ...`, or a
  lowercase word followed by an option, with no sentence punctuation at the end), and a command in
  double quotes as the Slurm FAQ writes them ("scontrol update NodeName=<node> State=resume": a
  lowercase word, then an option, a key=value or a <placeholder>);
- option: every `--long-option` (with its `=value`, if any) anywhere in the answer;
- path: every absolute or home path (`/etc/slurm/slurm.conf`, `~/.ssh/config`).

An operator may also act on a specific the model made up (call a pager number, mail an
address, wait 30 minutes), so these are checked too, in the answer's prose (specifics.py
says how each kind is matched): email, url, host, phone, number (a phone-shaped id such as
a job id), quantity (a number with a time,
size, percent, rate or temperature unit), version, time (of day: `01:00`) and name (a
capitalised multi-word name with a word no passage uses).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

from app.copilot.code_spans import FENCE, INLINE, WORD_EDGES, inline_code, joined_spans, options, without_fences
from app.copilot.declared_placeholders import as_placeholders, declared_placeholders, is_stand_in_path
from app.copilot.events import GroundingItem
from app.copilot.example_values import example_values
from app.copilot.nearest import nearest_in_sources
from app.copilot.specifics import check_specifics
from app.copilot.subcommands import COMMAND_WORD

_PATH = re.compile(r"(?<![\w./~-])(?:~|\.{1,2})?(?:/[\w.@%+-]+){2,}/?")
_COMMAND = re.compile(r"^(?:\$\s+)?(?:sudo\s+)?[a-z][\w.-]*(?:\s+\S+)*?\s+--?[A-Za-z]")
# A command in double quotes, as the Slurm FAQ and troubleshooting guide write them ("scontrol update
# NodeName=<node> State=resume") and the model copies: a lowercase first word, then an option, a key=value
# or a <placeholder>, which prose in quotes ("Not responding", "the node is down") does not have.
_QUOTED = re.compile(r'["“]([a-z][\w.-]* [^"“”\n]+)["”]')
_COMMAND_MARK = re.compile(r"(?:^|\s)--?[A-Za-z]|\w=\S|<[^<>\s]+>")
_SPACE = re.compile(r"\s+")
_QUOTED_NAME = re.compile(r"(?<!\w)(['\"`‘“])([\w.-]+)['\"`’”](?!\w)")  # 'long', "test", `nvme`
# A shell comment in words ("# Install the PAM module", "# For example:"), which no one runs; a root prompt
# before a command ("# sacctmgr add user ...", the man pages' way) starts lowercase and is checked.
_COMMENT = re.compile(r"#+\s+[A-Z][^=<>`]*")
_CONTINUED = re.compile(r"\\[ \t]*\n")  # a shell line continuation: the command goes on on the next line
_SHORT_OPTION = re.compile(r"(-[A-Za-z])(\d[\d\-:/T]*)")  # -N1, -S2014-07-03-11:40 (a date)
_VALUE_SPLIT = re.compile(r"[:,]")
_LETTER_CLASS = re.compile(r"[A-Z0-9]{2,12}")  # `[KMGTP]`: one of these letters; `[name]` is no such class
# 20, 0-499%10, [1-16], 16G; a job array's task, 5000_7 or 5000_[1-3] (fresh15, session 60: `scancel 5000_7` was
# flagged); a date with its hour, as a time value splits at ':' (StartTime=2024-05-01T14:00:00); a date written with
# slashes, as sreport and sacct take it (start=2/16/09)
_NUMBER = re.compile(r"[\d.%+\-\[\]_]*\d[\d.%+\-\[\]_]*[KMGTPkmgtp]?[Bb]?|\d{4}-\d\d-\d\dT\d\d?|\d{1,4}(?:/\d{1,4}){2}")
_NUMBER_PREFIX = re.compile(
    r"[\d.%+\-\[\]_]*\d?[\d.%+\-\[\]_]*[KMGTPkmgtp]?|\d{4}-\d\d-\d\dT\d{0,2}|\d{1,4}(?:/\d{0,4}){0,2}"
)  # its start
_PLACEHOLDER = re.compile(r"<[^<>]+>|\{[^{}]+\}|\.\.\.")
_SLOT = re.compile(r"<[^<>\s]+>")
_SLOTS = re.compile(r"<[^<>\s]+>(?:[^\w\s<>]+<[^<>\s]+>)+")  # `<backend>/<server>`, `<user>@<host>`
_JOINERS = re.compile(r"[\W_]+")
_SPACED_EQUALS = re.compile(r"(?<=\w) ?= ?(?=\S)")  # `RebootProgram = /sbin/reboot` reads as one setting
# `Reason="ECC memory warnings"`: the quoted words are one value (the user's reason), not arguments of their own
_QUOTED_SETTING = re.compile(r"""(?<!\S)[^\s="']+=(["'])[^"'\n]*?\s[^"'\n]*?\1(?=[\s.,;:)]|$)""")
_BUILT_KINDS = ("code", "command", "option")  # the kinds a user's values may go into (`_built_from_one`)
_COMMAND_WORD = re.compile(COMMAND_WORD)  # the shape of the commands `subcommands.tool_commands` collects


def normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _joined(text: str) -> str:
    """`text` with continued shell lines joined, as a command copied onto one line reads."""
    return _CONTINUED.sub(" ", text)


class GroundingSources:
    """The passages as the check reads them: one whitespace-normalised haystack and each passage's pieces.

    Built once per answer; `finds` is the check for one item, and the decoding constraint
    (copied_code.py) asks it the same question while a code span is still being written.
    """

    def __init__(
        self, passages: Sequence[str], question: str = "", commands: Mapping[str, frozenset[str]] | None = None
    ) -> None:
        self.commands = commands or {}  # a tool's commands, from its man page (subcommands.tool_commands)
        self.joined = [_joined(p) for p in passages]
        self.haystack = normalise("\n".join(self.joined))
        self.haystacks = [normalise(p) for p in self.joined]  # each passage on its own
        self.vocabularies = [_pieces_of(p) for p in self.joined]
        self.sorted_vocabularies = [sorted(v) for v in self.vocabularies]
        self.question = question
        self._spaced_question = f" {_spaced(question)} "
        self._question_values = _question_values(question)

    def finds(self, kind: str, text: str) -> tuple[bool, bool]:
        """(found, adapted) for one normalised item: verbatim in a passage, or built from one passage and
        the user's own values (`_built_from_one`) for code, commands and options."""
        if text in self.haystack:
            return True, False
        return self._built(kind, text)

    def holders(self, numbers: Sequence[int], text: str) -> tuple[int, ...]:
        """The numbers of the passages that hold `text` (normalised) verbatim."""
        return tuple(number for number, haystack in zip(numbers, self.haystacks, strict=True) if text in haystack)

    def unasked_values(self, text: str) -> tuple[str, ...]:
        """The values of an adapted item that no passage has and the question does not write: a number the
        model chose for the user. Asked for "two more hours", `--time-min=2:00` (two minutes in the source's
        `minutes:seconds`) fills the option with 2:00, which the user never wrote."""
        chosen = (
            word.split("=", 1)[1] if "=" in word.lstrip("=") else word  # the value as written: 2:00, not 2 and 00
            for i, word in enumerate(_command_words(text))
            if any(self._unasked(role, piece) for role, piece in _split_word(word, first=i == 0))
        )
        return tuple(dict.fromkeys(chosen))

    def _unasked(self, role: str, piece: str) -> bool:
        return (
            role != "name"
            and not _PLACEHOLDER.fullmatch(piece)
            and not any(piece in vocabulary for vocabulary in self.vocabularies)
            and f" {_spaced(piece)} " not in self._spaced_question
        )

    def builders(self, numbers: Sequence[int], kind: str, text: str) -> tuple[int, ...]:
        """The numbers of the passages whose pieces, with the user's own values, make up `text` (`_built`)."""
        if kind not in _BUILT_KINDS:
            return ()
        return tuple(numbers[i] for i, _ in _builders(text, self.vocabularies, self.question))

    def holds_whole(self, kind: str, text: str) -> bool:
        """`finds`, but a verbatim match must not cut a word (`scontrol rebo` is no command); a bare
        `<placeholder>` is the user's to fill in, so the decoding filter may close it."""
        if is_placeholder(text):
            return True
        at = self.haystack.find(text)
        while at >= 0:
            before, after = self.haystack[at - 1 : at], self.haystack[at + len(text) : at + len(text) + 1]
            if not (_cuts(before, text[0]) or _cuts(text[-1], after)):
                return True
            at = self.haystack.find(text, at + 1)
        return self._built(kind, text)[0]

    def _built(self, kind: str, text: str) -> tuple[bool, bool]:
        """(found, adapted) by `_built_from_one`, for the kinds a user's values may go into; a lone value the
        question itself writes (`cn117` for a question about node cn117) is the user's: found, nothing to check."""
        if kind not in _BUILT_KINDS:
            return False, False
        if text in self._question_values:
            return True, False
        if self.unknown_command(text):
            return False, False
        return _built_from_one(text, self.vocabularies, self.question)

    def unknown_command(self, text: str, finished: bool = True) -> bool:
        """Does `text` run a tool with a command its man page does not list (`scontrol change`, `scontrol move`)?

        A tool such as scontrol or sacctmgr takes one of a fixed set of commands as its first argument. The model
        writes one that sounds right, and each of its words may stand in a passage's prose, so the built-from-one
        rule alone would find it. With `commands` known for the tool, the word after it must be one of them (or
        begin one, while it is still being written: `finished` False)."""
        words = text.split()
        known = self.commands.get(words[0]) if len(words) >= 2 else None
        if known is None or _COMMAND_WORD.fullmatch(words[1]) is None:
            return False
        if len(words) == 2 and not finished:  # the command's word is still being written
            return not any(command.startswith(words[1]) for command in known)
        return words[1] not in known

    def may_complete(self, text: str) -> bool:
        """Can a code span or option still being written (`text`, cut anywhere) end up found?

        True when it is verbatim so far, or when one passage has every finished piece (user values
        aside) and a word starting with the unfinished last piece. Lenient on purpose: `finds` judges
        the finished item.
        """
        text = _SPACE.sub(" ", text).lstrip()
        if not text or text in self.haystack or any(value.startswith(text) for value in self._question_values):
            return True
        if self.unknown_command(text, finished=text[-1].isspace()):
            return False
        split = pieces(text)
        if not split:
            return True
        last_open = not text[-1].isspace() and text[-1] not in "=:,"
        done, (last_role, last) = (split[:-1], split[-1]) if last_open else (split, ("", ""))
        needed = {piece for role, piece in done if not _users_value(role, piece, self.question)}
        users = bool(last) and last_role != "name" and self._user_value_prefix(last)
        return any(
            needed <= vocabulary and (not last or users or _has_prefix(ordered, last))
            for vocabulary, ordered in zip(self.vocabularies, self.sorted_vocabularies, strict=True)
        )

    def completions(self, stem: str) -> set[str]:
        """The passages' words and pieces that start with `stem` and go on past it (`ssha` -> `sshare`)."""
        found: set[str] = set()
        for ordered in self.sorted_vocabularies:
            at = bisect_left(ordered, stem)
            while at < len(ordered) and ordered[at].startswith(stem):
                if len(ordered[at]) > len(stem):
                    found.add(ordered[at])
                at += 1
        return found

    def _user_value_prefix(self, piece: str) -> bool:
        """Could `piece` grow into a user's value: a number, a placeholder or words of the question
        (`firmware_` may become `firmware_update` for a question about a "firmware update")?"""
        if _NUMBER_PREFIX.fullmatch(piece) or piece[0] in "<{.":
            return True
        spaced = _spaced(piece) + (" " if _JOINERS.match(piece[-1]) else "")
        return bool(spaced.strip()) and f" {spaced}" in self._spaced_question


def _question_values(question: str) -> frozenset[str]:
    """The question's words that name a value of the user's own rather than a plain word or an option: a
    node, job or host name with a digit or a joiner in it (`cn117`, `gpu-node-3`, `4711`), or a word the
    question quotes (`_quoted_names`)."""
    words = (word.strip(WORD_EDGES + "?!") for word in question.split())
    named = (word for word in words if len(word) >= 2 and not word.isalpha() and not word.startswith("-"))
    return frozenset(named) | _quoted_names(question)


@lru_cache(maxsize=64)  # the decoding filter asks per token, with one question per answer
def _quoted_names(question: str) -> frozenset[str]:
    """Single words the question puts in quotes: the user's names for their own things, even plain words
    ("the QOS called 'test'", "under the 'long' QOS"), as `sacctmgr delete qos test` writes them."""
    return frozenset(match.group(2) for match in _QUOTED_NAME.finditer(question))


def _spaced(text: str) -> str:
    """`text` casefolded, its words joined by single spaces (`Firmware_Update` -> `firmware update`)."""
    return " ".join(_JOINERS.sub(" ", text).casefold().split())


def _cuts(left: str, right: str) -> bool:
    """Does a boundary between these two characters fall inside a word?"""
    return bool(left) and bool(right) and left.isalnum() and right.isalnum()


def _has_prefix(ordered: Sequence[str], prefix: str) -> bool:
    """Does the sorted `ordered` hold a word starting with `prefix`?"""
    at = bisect_left(ordered, prefix)
    return at < len(ordered) and ordered[at].startswith(prefix)


def check_grounding(
    answer: str,
    passages: Sequence[str],
    question: str = "",
    numbers: Sequence[int] | None = None,
    commands: Mapping[str, frozenset[str]] | None = None,
) -> list[GroundingItem]:
    """Every checkable item of `answer`: commands, options, paths and code in order of appearance, then specifics.

    `question`: the user's words, the conversation's questions in a follow-up (pipeline.py). Their values are
    the user's own (`NodeName=c042` built from a source's `NodeName=name`), and they count as a source for
    specifics only (a user's own "2 hours" is not invented).
    A command, code line or option not found carries the closest one a passage has (nearest.py); one
    found carries the sources' example values it kept where `question` names the user's own
    (example_values.py).
    `numbers` are the passages' source numbers (default 1, 2, ...); `commands`, the commands each tool of the
    index takes (`GroundingSources.unknown_command`).
    """
    numbers = list(numbers) if numbers is not None else list(range(1, len(passages) + 1))
    sources = GroundingSources(passages, question, commands)
    declared = declared_placeholders(answer)
    seen: dict[str, GroundingItem] = {}
    for kind, text in extract_items(answer):
        text = normalise(text)
        checked = as_placeholders(text, declared)  # "Replace `job_id` with ..." made `job_id` a slot
        if text and text not in seen and not is_placeholder(checked) and not is_stand_in_path(text):
            found, adapted = sources.finds(kind, checked)
            nearest = None if found else nearest_in_sources(text, kind, sources.joined, numbers)
            command = checked.split()[1] if not found and sources.unknown_command(checked) else ""
            unasked = sources.unasked_values(checked) if adapted else ()
            examples = example_values(text, sources.haystack, question) if found else ()
            seen[text] = GroundingItem(
                text,
                kind,
                found,
                *(nearest or ("", None)),
                adapted=adapted,
                unasked=unasked,
                examples=examples,
                not_a_command=command,
            )
    specifics = [item for item in check_specifics(answer, passages, question) if item.text not in seen]
    placed = [_placed(item, sources, numbers, as_placeholders(item.text, declared)) for item in seen.values()]
    return [*placed, *(_placed(item, sources, numbers, item.text) for item in specifics)]


def _placed(item: GroundingItem, sources: GroundingSources, numbers: Sequence[int], checked: str) -> GroundingItem:
    """`item` with the passages that hold it verbatim, for the check of what its sentence cites
    (attribution.py), or, found otherwise, with those it was put together from; `checked` is its text as
    checked (declared placeholders marked)."""
    if not item.found:
        return item
    holders = () if item.adapted else sources.holders(numbers, checked)
    if holders:
        return replace(item, holders=holders)
    return replace(item, built_from=sources.builders(numbers, item.kind, checked))


def is_placeholder(text: str) -> bool:
    """A bare stand-in such as `<job_id>`: the user fills it in, nothing to find in a source or to run."""
    return bool(_PLACEHOLDER.fullmatch(text.strip()))


def extract_items(answer: str) -> Iterable[tuple[str, str]]:
    for block in FENCE.finditer(answer):
        for line in block.group(1).splitlines():
            # a closing fence cut short by the length limit is no code, nor is a comment in words
            if line.strip().strip("`") and not _COMMENT.fullmatch(line.strip()):
                yield "code", drop_prompt(line)
    prose = joined_spans(without_fences(answer))  # a span a soft wrap cut is one span
    for code in inline_code(prose):
        yield "code", drop_prompt(code)
    outside = INLINE.sub(" ", prose)  # prose without its inline code
    for span in _QUOTED.finditer(outside):
        if _COMMAND_MARK.search(span.group(1)):
            yield "command", span.group(1).strip()
    for line in outside.splitlines():
        line = line.strip().lstrip("-*• ").strip()
        if looks_like_command(line):
            yield "command", drop_prompt(line)
    for option in options(answer):
        yield "option", option
    for match in _PATH.finditer(answer):
        yield "path", match.group(0).rstrip(".")


def _words(text: str) -> set[str]:
    return {word.strip(WORD_EDGES) for word in text.split()} - {""}


def _pieces_of(text: str) -> set[str]:
    """Every word of a passage and every piece of it, split as `pieces` splits a command's words, and each
    value a piece offers as a choice (`_choices`)."""
    words = _words(text)
    split = {piece for word in words for _, piece in _split_word(word, first=False)}
    return words | split | {choice for piece in split for choice in _choices(piece)}


def _choices(piece: str) -> list[str]:
    """The values a man page's value notation offers: `{append|truncate}` and `<yes|no>` each word, `[KMGTP]`
    each letter (sacct's `--units=[KMGTP]` takes `--units=G`). Edges may have been cut off with the word's."""
    bare = piece.strip("[]{}<>")
    if "|" in bare:
        return [choice for choice in bare.split("|") if choice]
    return list(bare) if piece.startswith("[") and _LETTER_CLASS.fullmatch(bare) else []


def pieces(line: str) -> list[tuple[str, str]]:
    """(role, text) for each piece of a command line: role "name" for its first word, an option's
    name (`--array`, `-N`) or a setting's key (`State`), "value" for what follows `=` or `:` (split
    at `:` and `,`), "arg" for any other word."""
    return [piece for i, word in enumerate(_command_words(line)) for piece in _split_word(word, first=i == 0)]


def _command_words(line: str) -> list[str]:
    """The words of a command line, `key = value` and `key="several words"` each read as one setting, edge
    punctuation dropped."""
    line, words, at = _SPACED_EQUALS.sub("=", line), [], 0
    for setting in _QUOTED_SETTING.finditer(line):
        words += [*line[at : setting.start()].split(), setting.group(0)]
        at = setting.end()
    words += line[at:].split()
    return [word for word in (word.strip(WORD_EDGES) for word in words) if word]


def _split_word(word: str, first: bool) -> list[tuple[str, str]]:
    short = _SHORT_OPTION.fullmatch(word)
    if short:  # -N1: the option -N with the value 1; -S2014-07-03-11:40 splits as a setting's value does
        return [("name", short.group(1)), *_values(short.group(2))]
    if "=" in word.lstrip("=") and not word.startswith("="):
        key, value = word.split("=", 1)
        # a man page's optional value: `--nice[=adjustment]` names the option `--nice`
        return [("name", key.removesuffix("[")), *_values(value)]
    return [("name" if first or word.startswith("-") else "arg", word)]


def _values(value: str) -> list[tuple[str, str]]:
    """An option's or setting's value as pieces: unquoted, split at `:` and `,`."""
    return [("value", v) for v in _VALUE_SPLIT.split(value.strip("'\"")) if v]


def _users_value(role: str, piece: str, question: str) -> bool:
    """Is `piece` the user's own rather than the software's: a number, a range, a size or a
    time, a placeholder (`<job_id>`), or a value the question names (`c042`, `firmware_update`)?

    Names (commands, options, keys) never are. A bare word counts from the question only if it is
    not a plain word, so `scontrol restart` is not grounded by a question that says "restart"."""
    if role == "name":
        return False
    if _NUMBER.fullmatch(piece) or _PLACEHOLDER.fullmatch(piece):
        return True
    if role == "arg" and piece.isalpha():
        return piece in _quoted_names(question)
    spaced = _spaced(piece)
    return len(spaced) >= 2 and f" {spaced} " in f" {_spaced(question)} "


def _built_from_one(line: str, vocabularies: Sequence[set[str]], question: str) -> tuple[bool, bool]:
    """(found, with user values): is every piece of a command line either a piece of one and the same
    passage, or the user's own value (`_users_value`)? A line of one piece is left to the verbatim check."""
    first = next(_builders(line, vocabularies, question), None)  # the decoding filter asks per token: stop at one
    return (True, first[1]) if first else (False, False)


def _builders(line: str, vocabularies: Sequence[set[str]], question: str) -> Iterator[tuple[int, bool]]:
    """(index, with user values) of each passage whose pieces, with the user's own values, make up `line`."""
    split = pieces(line)
    if len(split) < 2:
        return
    needed = {
        word: role
        for role, text in split
        if not _users_value(role, text, question)
        for word in (text.split() if role == "value" else [text])  # a quoted value no question names: its words
    }
    if not needed:
        return
    sourced = {text for _, text in split}
    for i, vocabulary in enumerate(vocabularies):
        missing = [text for text in needed if text not in vocabulary]
        if all(needed[text] != "name" and _fills_slots(text, vocabulary, question) for text in missing):
            yield i, bool(missing) or not sourced <= vocabulary


def _fills_slots(piece: str, vocabulary: set[str], question: str) -> bool:
    """Does `piece` fill in one of the passage's joined placeholders with the question's own words or
    numbers? `api/web-07` fills `<backend>/<server>` for a question about "web-07 in the api backend",
    as `disable server api/web-07` fills `disable server <backend>/<server>`. A lone `<name>` is no such
    slot: any word would fill it, and a plain word of the question is no value (`_users_value`)."""
    for template in vocabulary:
        if "<" in template and _SLOTS.fullmatch(template):
            literals = _SLOT.split(template)
            match = re.fullmatch("(.+?)".join(map(re.escape, literals)), piece)
            if match and all(_NUMBER.fullmatch(value) or value in _words(question) for value in match.groups()):
                return True
    return False


def looks_like_command(line: str) -> bool:
    return bool(line) and len(line.split()) <= 16 and line[-1] not in ".:;?!" and bool(_COMMAND.match(line))


def drop_prompt(line: str) -> str:
    """A code line as a command: without a leading `$ ` prompt or a trailing `\\` continuation."""
    line = line.strip()
    line = line[2:] if line.startswith("$ ") else line
    return line[:-1].rstrip() if line.endswith("\\") else line
