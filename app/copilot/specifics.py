"""Specifics an answer may invent: emails, URLs, hosts, phone numbers, quantities, versions and names.

A 1.5B model asked for something its sources lack tends to fill the gap with a plausible
specific ("the on-call admin is John Smith, pager 555-0134"). Each specific in the prose
of the answer (code is checked verbatim by grounding.py) is listed and marked found when
the passages, or the question itself (the user's own words are not invented), have it in
a comparable form:
- email, url, host: the same text, case-insensitively (a URL without trailing punctuation;
  a host is a dotted name ending in a common top-level or site domain);
- phone: 7-15 digits, in groups (`+41 22 767 1111`, `555-0134`) or one run (`1234567890`):
  the same digits, separators ignored, as such a number of a passage; dates, times, IP
  addresses and version numbers are not phone numbers. One that follows a word naming an
  identifier (job, task, array, port, ticket...) or a setting's value (value, default,
  maximum...) on its line, with no contact word (phone,
  pager, call...) there, is listed as a `number` instead and matched alike: a job id or a
  task range is a claim to check, not a contact to withhold (withhold.py);
- quantity: a number with a time, size, percent, rate, power or temperature unit: the same
  number with the same unit after synonyms are merged (`30 min` = `30 minutes`, `2GB` =
  `2 GB`), a duration in any time unit (`120 minutes` = `2 hours`), and a source's number
  written as a word ("two more hours" has `2 hours`); a bare count ("2 GPUs") is not checked;
- version: a dotted number of three or more parts (a version such as `470.57.02`, or an
  address such as `10.0.0.1`), or of two parts shortly after a word naming a version in its
  sentence (version, release, driver, firmware...: "the driver version for CUDA 12 is
  470.59"): the same text; an upgrade to a made-up driver version is acted on as surely as a
  made-up command;
- time: a time of day or clock duration (`01:00`, `23:59:30`, `9 PM` as 21:00): the same hours, minutes and
  seconds (`1:00` = `01:00`). Asked for a maintenance window the docs do not give, an answer said
  "from 01:00 to 03:00", the hours of the prompt's worked example (session 27);
- setting: a configuration key (CamelCase or with an underscore) given a number in prose
  (`MaxJobsAccruePerUser: 50`, "LimitFactor is set to 2", "set KillWait to 30"): found when a source
  writes that key with that number shortly after it, or the question gives the number. Asked which
  limits "our" student QOS has, an answer listed `LimitFactor: 2` and two more such values, settings
  its passages describe with no value at all (fresh4 `h-24`, session 35);
- identifier: a configuration key or variable named in prose (CamelCase, or capitals with an underscore:
  `SLURM_NODE_NAME`) that no passage and not the question writes; only such ones are listed (always not
  found). Asked which variable names the node a batch script runs on, an answer gave "SLURM_NODE_NAME", which
  no Slurm page has (`SLURMD_NODENAME` is right; fresh16, session 60), and nothing was flagged: code is checked,
  and the answer had none. Over every saved answer, 88 of 89 such names in prose are the passages' own;
- name: two or three capitalised words in a row (a sentence's first word is skipped when
  the sources use it) of which at least two appear nowhere in the passages or question,
  such as a made-up person ("John Smith"); only such names are listed (always not found):
  capitalised runs built from the sources' words ("Slurm Workload Manager", "Restart
  Slurm") are the sources' terms, not claims.
These are heuristics: a flag means "check this before acting on it", not "wrong".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.copilot.code_spans import prose as prose_of
from app.copilot.definitions import CONFIG_KEY
from app.copilot.events import GroundingItem

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>`'\")\]]+")
_TLDS = "com|org|net|edu|gov|int|io|ch|de|uk|fr|it|nl|es|eu|us|local|lan|internal|corp|cluster|site"
_HOST = re.compile(rf"(?<![\w.@/-])(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:{_TLDS})(?![\w.-]*\w)", re.I)
_PHONE = re.compile(r"(?<![\w.:/=%-])\+?(?:\(\d{1,4}\)[ .-]?)?\d{1,15}(?:[ .-]\d{2,5}){0,4}(?![\w:/%]|[.-]\d)")
# the words before a phone-shaped number that make it an identifier, unless a contact word is there too
_IDENTIFIER_WORD = re.compile(
    r"\b(?:jobs?|jobid|tasks?|arrays?|steps?|pids?|process|ports?|[ug]id|ids?|tickets?|version|build|serial|commit|range"
    r"|value|default|maximum|minimum|limit)\b",  # ... or a setting's value ("the default value is 1000000000")
    re.I,
)
_CONTACT_WORD = re.compile(
    r"\b(?:phone|pager|page|call|dial|tel|telephone|mobile|cell|contact|reach|hotline|sms|text|fax|ext|extension)\b",
    re.I,
)
# An internal extension is a phone number too: 3-6 digits after a word that makes it one, in its sentence ("phone
# extension is 4333", "pager 4111"). Asked for the Storage Expert's extension, which the runbooks never give,
# an answer gave the Security Officer's 4333; an invented one was not even looked at (session 57). Any 3-6 digit
# number of a source finds it: their tables write "Facilities Duty (4999)" with no such word.
# ("call" is not enough for so short a number: "the call returned 404")
_EXTENSION_WORDS = r"\b(?:ext|extension|phone|pager|tel|telephone|dial|hotline)\b"
_EXTENSION_WORD = re.compile(_EXTENSION_WORDS, re.I)
_SHORT_NUMBER = re.compile(r"(?<![\w.:/=%,+-])\d{3,6}(?![\w:/%]|[.,-]\d)")
_NOT_PHONE = re.compile(r"^(?:\d{4}-\d{2}-\d{2}|\d{1,3}(?:\.\d{1,3}){3}|\d+(?:\.\d+)+)$")
_UNITS = {
    "ms": ("ms", "msec", "millisecond", "milliseconds"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "min": ("min", "mins", "minute", "minutes"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "d": ("day", "days"),
    "w": ("week", "weeks"),
    "month": ("month", "months"),
    "y": ("year", "years"),
    "B": ("B", "byte", "bytes"),
    "KB": ("KB", "kB", "kilobyte", "kilobytes"),
    "KiB": ("KiB",),
    "MB": ("MB", "megabyte", "megabytes"),
    "MiB": ("MiB",),
    "GB": ("GB", "gigabyte", "gigabytes"),
    "GiB": ("GiB",),
    "TB": ("TB", "terabyte", "terabytes"),
    "TiB": ("TiB",),
    "PB": ("PB", "petabyte", "petabytes"),
    "%": ("%", "percent", "per cent"),
    "Gbps": ("Gbps", "Gb/s", "Gbit/s"),
    "Mbps": ("Mbps", "Mb/s", "Mbit/s"),
    "MB/s": ("MB/s", "MBps"),
    "GB/s": ("GB/s", "GBps"),
    "W": ("W", "watt", "watts"),
    "kW": ("kW", "kilowatt", "kilowatts"),
    "°C": ("°C", "degC", "degrees C", "degrees Celsius"),
    "°F": ("°F", "degF", "degrees F", "degrees Fahrenheit"),
}
# Symbols are case-sensitive (Mb/s is not MB/s); lowercase words match in any case ("Minutes").
_CANONICAL = {alias: unit for unit, aliases in _UNITS.items() for alias in aliases}
_ALIASES = sorted(_CANONICAL, key=len, reverse=True)
_UNIT_ALT = "|".join(re.escape(a) for a in _ALIASES)
_QUANTITY = re.compile(rf"(?<![\w.,-])(\d+(?:[.,]\d+)?)\s?({_UNIT_ALT})(?![\w/])", re.I)
# A duration is one quantity in whatever unit it is written: the model converts the user's "two hours" to
# `TimeLimit=+120` and says "120 minutes". Months and years have no fixed length and stay as written.
_SECONDS = {"ms": 0.001, "s": 1, "min": 60, "h": 3600, "d": 86400, "w": 604800}
_SPELLED = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
)
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(_SPELLED.split(" "))} | {
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "ninety": "90",
    "hundred": "100",
}
_MORE = r"(?:more|extra|additional|full|whole)"
_NUMBER_WORD = re.compile(rf"\b({'|'.join(_NUMBER_WORDS)})\b(?=(?:\s+{_MORE})?\s+\w)", re.I)
_VERSION = re.compile(r"(?<![\w.:/-])v?\d+(?:\.\d+){2,}(?![\w-]|\.\w)")
_SHORT_VERSION = re.compile(r"(?<![\w.:/-])v?\d+\.\d+(?![\w-]|\.\w)")
# also a date-time's (`2009-02-06T16:00:00` holds the time 16:00)
_TIME = re.compile(
    r"(?:(?<=\dT)|(?<![\w:.-]))([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?(?:(?=[AaPp][Mm]\b)|(?![\w:]|\.\d))"
)  # 12:30PM as 12:30
_HOUR = re.compile(r"(?<![\w:.-])(1[0-2]|0?[1-9])(?::([0-5]\d))? ?([AaPp])(?:[Mm]\b|\.[Mm]\.)")  # 9 AM, 5pm, 10:30 p.m.
_SENTENCE_BREAK = re.compile(r"\n|[.;!?]\s")
_VERSION_WORD = re.compile(r"\b(?:versions?|releases?|drivers?|firmware|kernel|upgrade|update)\b", re.I)
_NAME = re.compile(r"(?<![\w-])[A-Z][a-z]+(?:[ ](?:[A-Z]\.[ ])?[A-Z][a-z]+){1,2}(?![\w-])")
# a configuration key (definitions.CONFIG_KEY) and the number the prose gives it
_SETTING_VALUE = re.compile(
    rf"({CONFIG_KEY.pattern})"
    r"(?:\s+(?:parameter|option|setting|value))?"
    r"(?:\s*[=:]\s*|\s+(?:is\s+|are\s+)?(?:set\s+)?(?:to|of|=)\s+|\s+is\s+)(\d+(?:\.\d+)?)(?![\w.-]*\d)"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\s+|\n\s*(?:[-*•]|\d+[.)])?\s*|\*\*)$")
_WORD = re.compile(r"[A-Za-z]+")


def check_specifics(answer: str, passages: Sequence[str], question: str = "") -> list[GroundingItem]:
    """The specifics of the answer's prose, in order of appearance, each once, marked found or not."""
    return SpecificsChecker(passages, question).check(answer)


class SpecificsChecker:
    """The sources' specifics, indexed once: checks an answer, or each prefix of one as it streams."""

    def __init__(self, passages: Sequence[str], question: str = "") -> None:
        self._sources = "\n".join([*passages, question])
        self._phones = {_digits(text) for _, text in _phones(self._sources)}
        self._phones |= {m.group() for m in _SHORT_NUMBER.finditer(self._sources)}  # an extension (see above)
        self._quantities = {quantity_key(text) for _, text in quantities(_with_digits(self._sources))}
        self._times = {_time_key(text) for _, text in _times(self._sources)}
        self._vocabulary = {w.casefold() for w in _WORD.findall(self._sources)}
        self._keys = set(CONFIG_KEY.findall(self._sources))  # configuration keys and variables, whole
        self._question_numbers = {float(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?", question)}

    def check(self, answer: str) -> list[GroundingItem]:
        """The specifics of the answer's prose, in order of appearance, each once, marked found or not."""
        prose = prose_of(answer)
        items: dict[str, GroundingItem] = {}
        named = [(start, "name", text) for start, text in _names(prose, self._vocabulary)]
        named += [
            (m.start(), "identifier", m.group()) for m in CONFIG_KEY.finditer(prose) if m.group() not in self._keys
        ]
        for _, kind, text in _specific_spans(prose, named):
            items.setdefault(text, GroundingItem(text, kind, self._found(kind, text)))
        return list(items.values())

    def _found(self, kind: str, text: str) -> bool:
        if kind in ("email", "url", "host"):
            return _casefolded(self._sources, text)
        if kind == "version":  # v23.11.1 is the sources' 23.11.1
            return _casefolded(self._sources, text.lstrip("vV"))
        if kind in ("phone", "number"):
            return _digits(text) in self._phones
        if kind == "quantity":
            return quantity_key(text) in self._quantities
        if kind == "time":
            return _time_key(text) in self._times
        if kind == "setting":
            return self._setting_found(text)
        return False  # a name or an identifier is listed only when no source has it

    def _setting_found(self, text: str) -> bool:
        """Whether a source writes the key with this number shortly after it (`MaxArraySize=1001`,
        "MaxArraySize ... default value is 1001"), or the number is the question's own."""
        m = _SETTING_VALUE.match(text)
        key, number = m.group(1), m.group(2)
        if float(number) in self._question_numbers:
            return True
        near = rf"(?<![\w-]){re.escape(key)}(?![\w-])[\s\S]{{0,80}}?(?<![\w.]){re.escape(number)}(?![\w]|\.\d)"
        return re.search(near, self._sources, re.I) is not None


def _names_an_identifier(before: str) -> bool:
    """Whether the words just before a phone-shaped number (on its line) say it is an id, not a contact."""
    line = before.rsplit("\n", 1)[-1]
    return bool(_IDENTIFIER_WORD.search(line)) and not _CONTACT_WORD.search(line)


def _emails(text: str) -> Iterable[tuple[int, str]]:
    return ((m.start(), m.group(0).rstrip(".")) for m in _EMAIL.finditer(text))


def _urls(text: str) -> Iterable[tuple[int, str]]:
    return ((m.start(), m.group(0).rstrip(".,;:!?")) for m in _URL.finditer(text))


def _hosts(text: str) -> Iterable[tuple[int, str]]:
    text = _URL.sub(lambda m: " " * len(m.group(0)), _EMAIL.sub(lambda m: " " * len(m.group(0)), text))
    return ((m.start(), m.group(0)) for m in _HOST.finditer(text))


def _phones(text: str) -> list[tuple[int, str]]:
    """Phone numbers, and other numbers of 7-15 digits (a made-up pager number is often one bare run)."""
    found = []
    for m in _PHONE.finditer(text):
        phone = m.group(0).strip()
        if 7 <= len(_digits(phone)) <= 15 and not _NOT_PHONE.match(phone):
            found.append((m.start(), phone))
    return found


def _specific_spans(prose: str, named: Iterable[tuple[int, str, str]] = ()) -> list[tuple[int, str, str]]:
    """(start, kind, text) of each specific of `prose` (and each of `named`: names and identifiers no source has)
    in order of appearance; where spans overlap, the first and longest (a host inside an email or URL is not listed
    again). An extension is a phone number, and a phone-shaped number after a word naming an identifier is a
    `number`."""
    extractors = {
        "email": _emails,
        "url": _urls,
        "host": _hosts,
        "phone": _phones,
        "extension": _extensions,
        "quantity": quantities,
        "version": _versions,
        "time": _times,
    }
    spans = [(start, kind, text) for kind, extract in extractors.items() for start, text in extract(prose)]
    spans += list(named)
    spans += [(m.start(), "setting", m.group(0)) for m in _SETTING_VALUE.finditer(prose)]
    listed, covered = [], -1  # covered: the end of the last listed span
    for start, kind, text in sorted(spans, key=lambda span: (span[0], -len(span[2]))):
        if start < covered:
            continue
        covered = start + len(text)
        if kind == "extension":
            kind = "phone"  # a contact like any other: withheld when invented (withhold.py)
        if kind == "phone" and _names_an_identifier(prose[max(0, start - 40) : start]):
            kind = "number"
        listed.append((start, kind, text))
    return listed


def contact_numbers(prose: str) -> list[tuple[int, str]]:
    """(start, text) of each phone number and extension of `prose` in order, as the check reads them (an id is
    none, nor are digits inside an email, URL, quantity or time)."""
    return [(start, text) for start, kind, text in _specific_spans(prose) if kind == "phone"]


def _extensions(text: str) -> Iterable[tuple[int, str]]:
    """Numbers of 3-6 digits that a contact word before them in their sentence makes an extension."""
    for m in _SHORT_NUMBER.finditer(text):
        before = _EXT_DOT.sub("ext ", text[max(0, m.start() - 60) : m.start()])
        sentence = _SENTENCE_BREAK.split(before)[-1]
        if _EXTENSION_WORD.search(sentence) and not (_YEAR.fullmatch(m.group()) and not _RIGHT_AFTER.search(before)):
            yield m.start(), m.group()


_EXT_DOT = re.compile(r"\bext\.", re.I)  # "ext. 4333" ends no sentence
_YEAR = re.compile(r"(?:19|20)\d\d")  # "call the helpdesk in 2026": a year, unless the word names the number
_RIGHT_AFTER = re.compile(_EXTENSION_WORDS + r"[\s:#*]*$", re.I)  # the word right before the number


def _versions(text: str) -> Iterable[tuple[int, str]]:
    yield from ((m.start(), m.group(0)) for m in _VERSION.finditer(text))
    for m in _SHORT_VERSION.finditer(text):
        sentence = _SENTENCE_BREAK.split(text[: m.start()])[-1]
        if _VERSION_WORD.search(sentence[-40:]):
            yield m.start(), m.group(0)


def quantities(text: str) -> list[tuple[int, str]]:
    """(start, text) of each number with a unit in `text`: "20 days", "0.5 %", "27 °C"."""
    return [(m.start(), m.group(0)) for m in _QUANTITY.finditer(text) if _unit(m.group(2)) is not None]


def _times(text: str) -> list[tuple[int, str]]:
    hours = {m.start(): m.group(0) for m in _HOUR.finditer(text)}  # 9:30 PM before 9:30
    return sorted([*hours.items(), *((m.start(), m.group(0)) for m in _TIME.finditer(text) if m.start() not in hours)])


def _time_key(text: str) -> tuple[int, int, int]:
    hour = _HOUR.fullmatch(text)
    if hour:  # 9 PM is 21:00, 12 AM is 00:00
        hours = int(hour.group(1)) % 12 + (12 if hour.group(3).casefold() == "p" else 0)
        return hours, int(hour.group(2) or 0), 0
    hours, minutes, seconds = (int(part) for part in [*text.split(":"), "0"][:3])
    return hours, minutes, seconds


def _names(text: str, vocabulary: set[str]) -> Iterable[tuple[int, str]]:
    for m in _NAME.finditer(text):
        words, start = m.group(0).split(" "), m.start()
        if _SENTENCE_START.search(text[: m.start()]) and words[0].casefold() in vocabulary:
            start += len(words[0]) + 1
            words = words[1:]
        if sum(w.casefold() not in vocabulary for w in words if not w.endswith(".")) >= 2:
            yield start, " ".join(words)


def _casefolded(sources: str, text: str) -> bool:
    return text.casefold() in sources.casefold()


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _unit(alias: str) -> str | None:
    """The canonical unit of an alias: symbols exactly as written, words (3+ letters) in any case."""
    alias = " ".join(alias.split())
    if alias in _CANONICAL:
        return _CANONICAL[alias]
    word = alias.casefold()
    return _CANONICAL.get(word) if len(word) > 2 and word.replace(" ", "").isalpha() else None


def quantity_key(text: str) -> tuple[float, str | None]:
    """A quantity as (value, dimension), its unit's synonyms one: "20 days" and "480 hours" are both
    (1728000.0, "duration"), "87%" and "87 %" (87.0, "%")."""
    m = _QUANTITY.match(text)
    if m is None:
        return (float("nan"), None)
    value, unit = float(m.group(1).replace(",", ".")), _unit(m.group(2))
    if unit in _SECONDS:
        return round(value * _SECONDS[unit], 6), "duration"
    return value, unit


def _with_digits(text: str) -> str:
    """`text` with a number written as a word before a unit in digits ("two more hours" -> "2 hours")."""
    spelled = _NUMBER_WORD.sub(lambda m: _NUMBER_WORDS[m.group(1).casefold()], text)
    return re.sub(rf"\b(\d+)\s+{_MORE}\s+(?=\w)", r"\1 ", spelled)
