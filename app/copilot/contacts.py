"""A contact number the sources give for someone else: the number found, the person wrong.

Asked in the chat for the Storage Expert's phone extension, which the runbooks never give (the Storage Expert
is reached through a helpdesk queue, at night only through the on-call administrator), the model answered "The
Storage Expert's phone extension is 4333.": the Site Security Officer's extension (session 57). The number is
in the sources, so the specifics check finds it, and no other check speaks; an operator would call the security
officer at 3 a.m. about a full disk.

So a phone number or extension in the answer's prose (specifics.py's reading) is reported, and the answer
withheld (withhold.py), when the answer's sentence names someone, a run of two or more capitalised words
("Storage Expert", "On-call Site Administrator") or an acronym a passage spells out ("SSO" of "Site Security
Officer (SSO)"), and no place of the passages that holds the number names any of them, while one of those
places names someone else. The place is the number's
sentence and the one before it ("Call the SSO first. Extension 4333, 24/7 ..."). A number the passages do not
hold at all is the specifics check's to flag, and a sentence that names nobody ("call 4333") is not judged.

Unless the question names whom it wants a number for. Asked "What is the phone number of the electricity provider
for the data centre?", which no runbook gives, the model wrote "The electricity provider for the data centre is the
Campus Network Operations Centre (NOC), which runs the border router br01 and the WAN link. Extension 4222 [4]."
(session 59, a blind runbook set): the NOC's extension, told of someone the sources never mention. So a sentence
that names nobody is judged against the question's "number of the X" / "X's extension" too, where X shares no word
(by its first four letters) with whom the passages give the number for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.copilot.code_spans import prose
from app.copilot.events import Definition, Passage
from app.copilot.markers import MARKER_GROUP
from app.copilot.quotes import last_sentence_end, sentence_around
from app.copilot.specifics import contact_numbers

# two or more capitalised words in a row ("On-call Site Administrator"), an article before them left out
_TITLED = re.compile(r"(?:\b(?:The|A|An)\s+)?((?:[A-Z][\w-]*)(?:\s+[A-Z][\w-]*)+)")
_SPELLED_OUT = re.compile(r"([A-Z][\w-]*(?:\s+[A-Z][\w-]*)+)\s+\(([A-Z]{2,6})\)")  # "Site Security Officer (SSO)"
_POSSESSIVE = re.compile(r"['’]s$")


def misattributed_numbers(answer: str, passages: Sequence[Passage], question: str = "") -> list[Definition]:
    """One Definition per contact number told of someone the passages never give it for: `name` and `said_of`
    the answer's person, `term` the passages', `quoted` the number, `text` the passage's words around it.

    A sentence that names nobody ("It is 4999 [2].") is told of the one person the question asks about, when it
    names exactly one the passages name, in any case ("what's the site manager's extension?")."""
    said = MARKER_GROUP.sub(" ", prose(answer))
    numbers = contact_numbers(said)
    if not numbers:
        return []  # most answers: no passage need be read
    flat = [flat_markdown(p.text) for p in passages]
    acronyms = {short for text in flat for _, short in _SPELLED_OUT.findall(text)}
    asked = _asked_about(question, flat, acronyms)
    wanted = "" if asked else wanted_contact(question)
    found: dict[str, Definition] = {}
    for start, number in numbers:
        named = _people(sentence_around(said, start, start + len(number)), acronyms) or asked
        places = [(p, own, before) for p in passages for own, before in _places(p.text, number)]
        if not (named or wanted) or not places or number in found:
            continue
        if any(person.casefold() in _one_line(before, own).casefold() for person in named for _, own, before in places):
            continue  # the passages give the number for one the answer names
        # whom a place gives it for: its own sentence's people, else those of the sentence before it
        holders = [(p, own, _holders(own, before, acronyms)) for p, own, before in places]
        p, own, people = next(((p, own, people) for p, own, people in holders if people), (None, "", []))
        if not named and p is not None:  # told of the question's X: judged by the words X shares with the holders
            if any(_stems(wanted) & _stems(person) for _, _, held in holders for person in held):
                continue
            named = [f"the {wanted}"]
        if p is not None:
            found[number] = Definition(
                named[0],
                people[0],
                p.number,
                p.title,
                " ".join(own.split()).strip(" ·"),
                quoted=number,
                said_of=named[0],
            )
    return list(found.values())


# "the phone number of the electricity provider", "an extension for our network team", "the NOC's number"
_NUMBER_WORDS = r"(?:phone\s+|telephone\s+|contact\s+|pager\s+|direct\s+)?(?:number|extension|hotline|line)"
_NUMBER_OF = re.compile(
    rf"\b{_NUMBER_WORDS}\s+(?:of|for)\s+(?:the\s+|our\s+|a\s+|an\s+)?"
    r"(?P<who>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,3}?)(?=\s+(?:for|at|in|on|of|to|if|when)\b|\s*[?.,!;]|\s*$)",
    re.I,
)
_WHOSE_NUMBER = re.compile(
    rf"(?:\b(?:the|our|a|an)\s+)?(?P<who>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){{0,2}})['’]s\s+{_NUMBER_WORDS}\b", re.I
)
_QUESTION_WORDS = {"what", "what's", "whats", "where", "which", "who", "is", "the", "our", "give", "me", "tell"}


def wanted_contact(question: str) -> str:
    """Whom the question asks a number for ("electricity provider" of "the phone number of the electricity provider
    for the data centre?"), '' when it names nobody so."""
    match = _NUMBER_OF.search(question) or _WHOSE_NUMBER.search(question)
    if match is None:
        return ""
    words = [word for word in match.group("who").split() if word.lower() not in _QUESTION_WORDS]
    return " ".join(words)


def _stems(text: str) -> set[str]:
    """The first four letters of each word of three letters or more, in lower case ("admi" of "admin" and
    "Administrator")."""
    return {word[:4].lower() for word in re.findall(r"[A-Za-z][\w-]{2,}", text)}


def _holders(own: str, before: str, acronyms: set[str]) -> list[str]:
    """Whom a place gives its number for: its own sentence's people (a name wrapped into it from the line before
    read whole: "On-call" / "Site Administrator" is the On-call Site Administrator), else the sentence before's."""
    people = _people(own, acronyms)
    if not people:
        return _people(before, acronyms)
    whole = _people(_one_line(before, own), acronyms)
    return [next((name for name in whole if name.endswith(f" {person}")), person) for person in people]


def _one_line(before: str, own: str) -> str:
    """A place's two sentences as one line: a name wrapped over a line break ("page the On-call" / "Site
    Administrator (extension 4111)", the FTS runbook) reads whole. Read apart, the v-01 probe's right answer was
    withheld for giving the On-call Site Administrator's own number (session 58)."""
    return " ".join(f"{before} {own}".split())


def flat_markdown(text: str) -> str:
    """`text` without emphasis marks, and a table's bars made a mark no name runs over: "Extension **4333**" reads
    as words, and "| Data Centre Facilities Duty | Power, UPS |" names no "Data Centre Facilities Duty Power"."""
    return re.sub(r"\|", " · ", re.sub(r"\*\*|__", " ", text))


def _places(text: str, number: str) -> list[tuple[str, str]]:
    """(its sentence, the sentence before it) of each place `text` writes `number` as a number of its own. A table
    row or a list item is a record of its own: the sentence before it is another's, so only its own line counts."""
    places = []
    for m in re.finditer(rf"(?<![\w.-]){re.escape(number)}(?![\w]|[.-]\d)", text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        sentence = last_sentence_end(text, m.start())
        before = last_sentence_end(text, sentence - 1) if sentence else 0
        if _RECORD.match(text, line_start):
            before = max(before, line_start)
        places.append((flat_markdown(sentence_around(text, m.start(), m.end())), flat_markdown(text[before:sentence])))
    return places


_RECORD = re.compile(r"[ \t]*(?:\||[-*+][ \t]|\d+[.)][ \t])")  # a table row or a list item


def _asked_about(question: str, texts: Sequence[str], acronyms: set[str]) -> list[str]:
    """The one person of the passages the question names (any case), as a list; [] for none or several."""
    known = {person for text in texts for person in _people(text, acronyms)}
    asked = {person for person in known if re.search(rf"\b{re.escape(person)}\b", question, re.I)}
    asked = {person for person in asked if not any(person != other and person in other for other in asked)}
    return list(asked) if len(asked) == 1 else []


def _people(text: str, acronyms: set[str]) -> list[str]:
    """Whom `text` names: runs of capitalised words and the passages' spelled-out acronyms, in order."""
    names = [_POSSESSIVE.sub("", m.group(1)) for m in _TITLED.finditer(text)]
    names += [word for word in re.findall(r"\b[A-Z]{2,6}\b", text) if word in acronyms]
    return list(dict.fromkeys(names))
