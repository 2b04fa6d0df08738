"""Withhold an answer that hands the operator contact details no source has.

A phone number or an email address is acted on as it is: an operator pages the number or
writes to the address. When the answer names one that the passages (and the question) do
not contain, the 1.5B model has made it up from the shape of the sources ("the on-call
admin is Doug Jacobsen, pager 555-1234", built from a Slurm meeting page). Flagging it, as
grounding does for other specifics, still shows the number; so the front ends show this
notice instead of the answer, and the conversation carries the notice, not the invention.
A version or an address (`470.30.0`, `10.0.0.1`) is acted on as literally: an operator
installs that driver or logs in to that host. A dev answer told them CUDA 12 needs driver
"470.30.0", which no source says (session 14); in the 61-question run it was the only
version or address in any answer that no source had. So such answers are withheld too.
Other unfound specifics (a quantity, a name, a command) stay flagged in a shown answer:
they are claims to check, not an address to use, with one exception: the value of a setting
that the question asks about and no passage names. Asked "what is CVMFS_TIMEOUT set to on our
worker nodes?", with six CVMFS passages none of which names it, an answer said "CVMFS_TIMEOUT
is set to 10 seconds on our worker nodes" (runbooks `rb-31`, which this rule was written after
reading). Such a value cannot come from the sources, since they never speak of that setting, and it
is about the operator's own site, where it would be acted on. So a prose sentence that names
such a setting (CamelCase or with an underscore, as configuration keys are written) and gives
an unfound value (a quantity, number, time or version) withholds the answer too. Rescoring the
168 saved answers of session 32's five sets, that answer alone was withheld by it. The same holds
for a tool: asked how to clear a BMC's event log "with ipmitool" over Slurm pages that never name
it, the model wrote `ipmitool sel clear` (fresh3 `g-18`, read before this was written). A command
line of the answer whose command the question names and no passage does comes from general
knowledge, which is what the prompt forbids; so it withholds the answer as well. Of 189 saved
answers (the five sets and fresh3), 11 code lines run a command no passage names; only `g-18`'s
tool was named by its question (the others: `curl`, `mv`, a misspelt `ssacctmgr`, ... stay flagged).

An answer that cites none of its sources is withheld too (`CitationGuard`). The prompt and
its demonstration open every answer with the [n] of its source, and the default model did
so in every answer it gave from the sources (53 of 53 answered eval questions, session 15).
An answer without one is written from somewhere else, general knowledge most likely. Its
text is held back until a valid [n] appears, which for a normal answer is its first three
tokens, so nothing uncited ever streams. The same guard trips on the prompt's own `[n]`
placeholder written into the answer's prose as a value: "The on-call administrator is [n],
and their pager number is [n]" (held-out `059`, which this rule was written after reading)
had nothing to say and said it in the template's words. With the passages listed best last
(session 20) the same question got "is [4], and their pager number is [5]": the source numbers
written as the values. A marker after a bare "is"/"are"/"was"/"were" that ends the clause
trips the guard the same way (no other answer of 116 distinct eval answers on record has one).
An answer that cites nothing but quotes one passage in every sentence did not come from general
knowledge: `specrag ask "How do I drain a node?"` answered, word for word from the Quick Start
guide it was shown as [1], "To drain a node, specify a new state of DRAIN, DRAINED, or DRAINING.
... Return it to service later." without a marker, and was withheld (session 25). Such an answer
is shown, opened with that passage's marker, and the front ends say the citation was added
(`quoted_source`, recite.py's note).

A contact number that the sources give for someone else than the answer's person withholds the answer
too (contacts.py): "The Storage Expert's phone extension is 4333." gave the Site Security Officer's
extension (session 57), and an operator would have called the wrong person at 3 a.m. Session 57 showed
it first as a warning under a shown answer; a number read is a number called, so the answer is held
back as an invented one is.

While the answer streams, `ContactGuard` shows its text only up to where no contact can
still be forming (a trailing run of digits and separators, a last word that may be or
become an email address, an open inline code span), and trips on the first invented
contact in that shown part: the number never reaches the screen, and generation stops there.
A sentence holding a contact number the sources do have is held back until it ends, when
it is known whom it gives the number for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.copilot.abstention import abstention_phrase
from app.copilot.attribution import sentence_spans
from app.copilot.code_spans import FENCE, INLINE, inline_code, line_spans, prose, prose_so_far
from app.copilot.contacts import misattributed_numbers
from app.copilot.definitions import CONFIG_KEY
from app.copilot.events import GroundingItem, Passage
from app.copilot.markers import MARKER_GROUP, cited_numbers
from app.copilot.quotes import last_sentence_end
from app.copilot.recite import MIN_RECITE_WORDS
from app.copilot.specifics import SpecificsChecker, contact_numbers
from app.copilot.unnumbered import TEMPLATE, unnumbered_citation

WITHHELD_KINDS = {"phone": "a phone number", "email": "an email address", "version": "a version or address"}
_ADVICE = {"phone": "contact", "email": "contact", "version": "version"}  # what to look up instead
# the end of a streaming text that may still become (part of) a contact: a number with its
# separators, or a last word that may be or become an email address
_OPEN_TAIL = re.compile(r"(?:\+?\(?\d[\d .()-]*|[\w.+-]*(?:@[\w.-]*)?)\Z")
_TAIL_WINDOW = 200  # characters searched for that tail; a longer one is held from the window's start
WITHHELD = "The sources do not cover this: the drafted answer"  # how every notice starts
# TEMPLATE (unnumbered.py), the placeholder the prompt's instruction writes its citations as ("... as [n]"): in an
# answer's prose it stands where the model had no value and no source ("the on-call administrator is [n]"), or,
# after words leading to a citation, where it had no number; this is its start, still forming
_TEMPLATE_TAIL = re.compile(r"\[[nN]?\Z")
PLACEHOLDER = (
    f"{WITHHELD} left the prompt's [n] placeholder where a value or source belongs, so it is not shown. "
    "Check the sources listed below."
)
# a source number written as the value itself: "the on-call administrator is [4], and their pager number is
# [5]." A citation follows a statement; after a bare "is" and before the clause ends, it is the statement.
# "The command is [1]:" (a code block follows) and "is described in [2]" are left alone.
_COPULA = r"\b(?:is|are|was|were)\s+"
_MARKER_AS_VALUE = re.compile(_COPULA + r"(?:\[\d+\]\s*)+(?:[,.;!?]|(?:and|or)\b)")
_MARKER_AS_VALUE_AT_END = re.compile(_COPULA + r"(?:\[\d+\]\s*)+\Z")
_MARKER_AS_VALUE_TAIL = re.compile(_COPULA + r"(\[[\d\[\]\s]*(?:an?|o)?)\Z")  # still undecided: held back
_CODE = " code "  # stands in for code in the prose: "is `8MB` [4]." gives its value, then cites
MARKER_AS_VALUE = (
    f'{WITHHELD} wrote a source number where a value belongs ("is [4]"), so it is not shown. '
    "Check the sources listed below."
)
UNCITED = (
    f"{WITHHELD} cited none of its sources, so it is not shown: it may come from general knowledge. "
    "Check the sources listed below."
)


QUOTED_SHARE = 0.8  # of a sentence's words, in runs a passage holds, for the sentence to quote that passage


def quoted_source(text: str, passage_texts: Mapping[int, str]) -> int | None:
    """The lowest-numbered passage that every prose sentence of an uncited answer quotes, else None.

    A sentence quotes a passage when the passage holds it whole, its full stop included (whitespace
    aside, at least three words), or when runs of MIN_RECITE_WORDS or more of its words that the
    passage holds cover QUOTED_SHARE of its words. One run was not enough: "To put a node back into
    service, you typically want to set its state to "DRAIN"." ends with nine words of a source that
    says so of *removing* a node from service (session 26, in the chat), and was shown as a quote.
    Code is left to the grounding check."""
    sources = {number: " ".join(body.split()) for number, body in passage_texts.items()}
    said = prose(text)
    sentences = [" ".join(said[begin:end].split()) for begin, end, _, _ in sentence_spans(said)]
    sentences = [sentence for sentence in sentences if sentence]
    if not sentences or not sources:
        return None
    holders = set(sources)
    for sentence in sentences:
        holders &= {number for number, body in sources.items() if _quotes(sentence, body)}
        if not holders:
            return None
    return min(holders)


def _quotes(sentence: str, body: str) -> bool:
    words = sentence.split()
    if len(words) >= 3 and sentence in body:  # whole, with its full stop: "Return it to service." is not "... later."
        return True
    covered = [False] * len(words)
    for i in range(len(words) - MIN_RECITE_WORDS + 1):
        if " ".join(words[i : i + MIN_RECITE_WORDS]) in body:
            covered[i : i + MIN_RECITE_WORDS] = [True] * MIN_RECITE_WORDS
    return any(covered) and sum(covered) >= QUOTED_SHARE * len(words)


def withheld_notice(grounding: Sequence[GroundingItem]) -> str:
    """The notice shown in place of the answer, or '' when every contact it names is in the sources."""
    kinds = {item.kind for item in grounding if item.kind in WITHHELD_KINDS and not item.found}
    if not kinds:
        return ""
    named = " and ".join(sorted(WITHHELD_KINDS[kind] for kind in kinds))
    look_up = " or ".join(sorted({_ADVICE[kind] for kind in kinds}))
    return (
        f"{WITHHELD} named {named} that no source contains, so it is not shown. "
        f"Look the {look_up} up where your site keeps it."
    )


def misattributed_notice(answer: str, passages: Sequence[Passage], question: str) -> str:
    """The notice shown in place of an answer that gives someone a contact number the sources give for someone
    else (contacts.py), or ''. The number is not repeated: it would be read, and called."""
    told = misattributed_numbers(answer, passages, question)
    if not told:
        return ""
    page = f" ({told[0].title})" if told[0].title else ""
    return (
        f"{WITHHELD} gave {told[0].said_of} a number that [{told[0].source}]{page} gives for {told[0].term}, "
        f"so it is not shown. Look up how to reach {told[0].said_of} in the sources below."
    )


VALUE_KINDS = ("quantity", "number", "phone", "time", "version")  # the specifics that state a setting's value
_WORD = re.compile(r"[A-Za-z][\w.-]*[\w]|[A-Za-z]")  # a word as a tool's name is written: slurm.conf, cvmfs_config
_COMMAND_WORD = re.compile(r"[a-z][\w.-]*")  # a command as typed: lower case first
_BARE_NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?(?![\w.-]*\w)")  # "set to 10": no specific, still a value


def unsourced_settings(question: str, passages: Sequence[str]) -> list[str]:
    """The configuration keys the question names that no passage names (any case)."""
    sources = "\n".join(passages).casefold()
    named = CONFIG_KEY.findall(question)
    return [name for name in dict.fromkeys(named) if name.casefold() not in sources]


class UnsourcedSubjectCheck:
    """Finds what an answer says of something the question names and no passage does: a value for a setting
    (`CVMFS_TIMEOUT is set to 10 seconds`), a command of a tool (`ipmitool sel clear`). See the module docstring."""

    def __init__(self, passages: Sequence[str], question: str, checker: SpecificsChecker | None = None) -> None:
        self.settings = unsourced_settings(question, passages)
        known = {word.casefold() for word in _WORD.findall("\n".join(passages))}
        self.tools = {word.casefold() for word in _WORD.findall(question)} - known
        self._checker = checker or SpecificsChecker(passages, question)
        self._numbers = {float(n) for n in _BARE_NUMBER.findall("\n".join([*passages, question]))}

    def notice(self, answer: str) -> str:
        """The withheld notice when `answer` runs a command of one of `tools`, or when a prose sentence of it
        names one of `settings` and gives a value no source has (an unfound specific, or a bare number); else ''."""
        for line in [line for body in FENCE.findall(answer) for line in body.split("\n")] + inline_code(answer):
            tool = _command_word(line)
            if tool and tool.casefold() in self.tools:
                return (
                    f"{WITHHELD} gave a command of {tool}, which no source names, so it is not shown. "
                    "Look the command up in that tool's own documentation."
                )
        if not self.settings:
            return ""
        for begin, end, _, fenced in sentence_spans(answer):
            sentence = answer[begin:end]
            named = [s for s in self.settings if re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", sentence, re.I)]
            if fenced or not named:
                continue
            bare = {float(n) for n in _BARE_NUMBER.findall(MARKER_GROUP.sub(" ", prose(sentence)))}
            items = self._checker.check(sentence)
            if bare - self._numbers or any(item.kind in VALUE_KINDS and not item.found for item in items):
                return (
                    f"{WITHHELD} gave a value for {named[0]}, which no source names, so it is not shown. "
                    "Look the setting up in your site's configuration."
                )
        return ""


# a credential as documentation writes one: after auth/password/secret/token, or a user:password pair after auth
_CREDENTIAL = re.compile(r"(?i)\b(?:auth|password|passwd|secret|token|api[_-]?key)\b[\s:=]+[\"']?([^\s\"'<>]+)")
_SECRET_LOOKING = re.compile(r"(?=.{6,})(?=.*(?:\d|[A-Z].*[a-z]|[a-z].*[A-Z]|[:$@!]))")  # not a plain word ("file")


def example_credential_notice(answer: str, passages: Sequence[str]) -> str:
    """The withheld notice when a prose sentence of `answer` gives a credential that a source shows as one.

    Documentation holds no site's passwords: a credential in it is an example. Asked for "the login for the
    stats page on our production HAProxy", the default model answered "The login for the stats page on our
    production HAProxy is admin1:AdMiN123." from `stats auth admin1:AdMiN123` in the configuration manual's
    example (session 36, in the chat and in the eval), and every check passed it, as every word is a source's.
    A code line or span that shows the example in its configuration stays: that is what the documentation says.
    """
    values = {v.rstrip(".,;") for v in _CREDENTIAL.findall("\n".join(passages))}
    values = {v for v in values if _SECRET_LOOKING.match(v)}
    for begin, end, _, fenced in sentence_spans(answer):
        # a code span that shows the value after its keyword (`stats auth admin1:AdMiN123`) quotes the example
        sentence = INLINE.sub(_unless_example, answer[begin:end])
        words = {w.strip("`'\"()[],.;") for w in sentence.split()}
        if not fenced and values & words:
            return (
                f"{WITHHELD} gave a credential from an example in the sources as if it were your site's, "
                "so it is not shown. Look the login up where your site keeps its credentials."
            )
    return ""


# A question that asks for a fact of the operator's own site: a wh-word opening a sentence or a clause, then
# "our", "we" or "us" in the same sentence ("What is our team's maintenance window...", "Where do we keep the
# certificate...", "Which of our nodes", "Before I book it, who signs it off, and how much notice do we give?").
# "How" asks for a way, not a fact, except as "how much / many / long / often" (fresh6 `s6-19`, session 44).
# grounding kinds that are ways to do or find, or names of them, not values
_NOT_VALUES = ("code", "command", "option", "path", "identifier")
_OWN_SITE_QUESTION = re.compile(
    r"(?:^|[.?!,;:]\s+)(?:what|which|where|when|who|how\s+(?:much|many|long|often))\b[^.?!]*\b(?:our|we|us)\b", re.I
)


def own_site_notice(question: str, answer: str, grounding: Sequence[GroundingItem]) -> str:
    """The withheld notice when a question asks for a fact of the user's own site and the answer gives a
    value that no source has (a time, quantity, number, setting, version...; a command or path is a way to
    look it up, and stays a flag), unless the answer says that the sources do not give it ("CVMFS_TIMEOUT is
    not in the sources. ...": flagged, shown). The value is not repeated in the notice.

    Documentation does not know a site's maintenance window or where it keeps its certificates; the relevance
    gate lets such a question through when the passages are on its topic. Asked for "our team's approved
    maintenance window for restarting the production Apache cluster", the default model answered "02:00 to
    04:00"; for "where do we keep the TLS certificate", `/etc/ssl/certs` (session 37; HAProxy's change window
    and a Slurm QOS's limits the same way). Each was flagged and still shown, as the site's own answer.
    """
    if not unsourced_values(grounding) or not own_site_question(question) or abstention_phrase(answer):
        return ""
    return (
        f"{WITHHELD} gave a value that no source has for a question about your own site, so it is not shown. "
        "Look it up where your site keeps it."
    )


def own_site_question(question: str) -> bool:
    """The question asks for a fact of the operator's own site ("What is our team's maintenance window...")."""
    return bool(_OWN_SITE_QUESTION.search(question))


def unsourced_values(grounding: Sequence[GroundingItem]) -> list[GroundingItem]:
    """The values (times, quantities, numbers, settings, versions...) of `grounding` that no source has."""
    return [item for item in grounding if not item.found and item.kind not in _NOT_VALUES]


def _unless_example(code: re.Match[str]) -> str:
    return " " if _CREDENTIAL.search(code.group("code")) else code.group(0)


def _command_word(line: str) -> str:
    """The command a code line runs (`ipmitool` of `$ sudo ipmitool sel clear`), '' when it runs none. A lone
    word is not a command line: `input` names a directory, `ipmitool` only names the tool."""
    words = line.strip().lstrip("$#> ").split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    return words[0] if len(words) >= 2 and _COMMAND_WORD.fullmatch(words[0]) else ""


def withheld_reason(notice: str) -> str:
    """Why a notice withholds its answer, for a front end's warning line: "the drafted answer cited none..."."""
    return notice.removeprefix(WITHHELD.split(": ", 1)[0] + ": ").split(", so it is not shown")[0]


class ContactGuard:
    """Releases a streaming answer's text as far as it is safe to show, until it names an invented contact.

    For a question about the operator's own site it releases whole sentences, and holds everything from the
    first one that gives a value no source has until the answer ends: whether that answer is shown depends
    on all of it (own_site_notice: one that goes on to say the sources lack the value is), and the value
    must not be on screen meanwhile."""

    def __init__(
        self, passages: Sequence[str], question: str, sources: Sequence[Passage] = (), asked: str = ""
    ) -> None:
        """`sources` and `asked`: the passages as Passages and the user's own question, for the check of a number
        given for someone else (misattributed_notice); without them it is not made."""
        self._checker = SpecificsChecker(passages, question)
        self._sources, self._asked = list(sources), asked
        self._unsourced = UnsourcedSubjectCheck(passages, question, self._checker)
        self._question = question
        self._own_site = own_site_question(question)
        self._holding = False  # an own-site answer gave an unsourced value: the rest waits for its end
        self._text = ""
        self._released = 0
        self.notice = ""  # not '': the answer named a contact no source has (the withheld notice)
        self.tripped = False  # the notice is a contact's (or an unsourced subject's): generation stops there

    def feed(self, delta: str) -> str:
        """Take the next piece of the answer; return the text that may now be shown ('' once tripped)."""
        self._text += delta
        end = _safe_end(self._text)
        if self._own_site or self._number_in_sentence(end):
            end = last_sentence_end(self._text, end)
        return self._release(end, done=False)

    def _number_in_sentence(self, end: int) -> bool:
        """Whether the unshown part of `_text[:end]`, read from the start of its sentence, gives a contact number
        (only when the number's person is checked: whom it is given for is known when the sentence ends)."""
        if not self._sources:
            return False
        start = last_sentence_end(self._text, self._released)
        return bool(contact_numbers(MARKER_GROUP.sub(" ", prose(self._text[start:end]))))

    def flush(self) -> str:
        """The answer ended: the held-back rest, checked ('' once tripped)."""
        return self._release(len(self._text), done=True)

    def _release(self, end: int, done: bool) -> str:
        if self.notice or end <= self._released:
            return ""
        shown = self._text[:end]
        items = self._checker.check(shown)
        self.notice = (
            withheld_notice(items)
            or self._unsourced.notice(shown)
            or misattributed_notice(shown, self._sources, self._asked)
        )
        self.tripped = bool(self.notice)
        if not self.notice and self._own_site:
            self._holding = self._holding or bool(unsourced_values(items))
            self.notice = own_site_notice(self._question, shown, items) if done else ""
        if self.notice or (self._holding and not done):
            return ""
        shown, self._released = self._text[self._released : end], end
        return shown


def _safe_end(text: str) -> int:
    """Where the part of `text` that no later token can turn into a contact ends."""
    window = text[-_TAIL_WINDOW:]
    match = _OPEN_TAIL.search(window)
    end = len(text) - len(window) + (match.start() if match else len(window))
    line_start = text.rfind("\n", 0, end) + 1
    line = text[line_start:end]
    still_open = [span for span in line_spans(line, True) if not span.closed]
    if still_open and not line.lstrip().startswith("```"):  # an inline code span is still open
        end = line_start + still_open[0].opening
    return end


class CitationGuard:
    """Holds a streaming answer back until it cites one of the passages by a valid [n], and trips when its
    prose writes the prompt's own `[n]` placeholder. An answer that ends uncited gets the UNCITED notice,
    one that writes the placeholder the PLACEHOLDER notice (and is not streamed further). With no passages
    there is nothing to cite, and it holds nothing."""

    def __init__(self, numbers: Sequence[int], passage_texts: Mapping[int, str] | None = None) -> None:
        self._numbers = set(numbers)
        self._texts = dict(passage_texts or {})
        self.cited = not self._numbers
        self._text = ""
        self._released = 0
        self.notice = ""  # not '': the answer wrote a marker as a value, or ended without citing any passage
        self.added: int | None = None  # an uncited answer that quotes this passage throughout: shown citing it
        self.unnumbered = False  # the answer cited by the [n] placeholder: shown up to there, and stopped

    @property
    def tripped(self) -> bool:
        """The prose wrote a marker where a value belongs: the answer is withheld and generation stops."""
        return self.notice in (PLACEHOLDER, MARKER_AS_VALUE)

    def feed(self, delta: str) -> str:
        """Take the next shown piece of the answer; return what may now be shown."""
        if self.notice or self.unnumbered:
            return ""
        if not self._numbers:
            return delta
        self._text += delta
        prose = prose_so_far(self._text, _CODE)
        if TEMPLATE.search(prose):
            end = unnumbered_citation(self._text)
            if end is not None and self._numbers.intersection(cited_numbers(self._text[:end])):
                self.unnumbered = True
                return self._release(end)
            self.notice = PLACEHOLDER
        elif _MARKER_AS_VALUE.search(prose):
            self.notice = MARKER_AS_VALUE
        if self.notice:
            return ""
        if not self.cited:
            self.cited = bool(self._numbers.intersection(cited_numbers(self._text)))
            if not self.cited:
                return ""
        # "[" or "[n" may still become the placeholder, "is [4]" a marker written as a value
        held = [m.start() for m in (_TEMPLATE_TAIL.search(self._text),) if m]
        held += [m.start(1) for m in (_MARKER_AS_VALUE_TAIL.search(self._text),) if m]
        return self._release(min(held, default=len(self._text)))

    def flush(self) -> str:
        """The answer ended: the held-back rest, or '' and the UNCITED notice when it cited no passage."""
        if not self._numbers or self.notice or self.unnumbered:
            return ""
        if _MARKER_AS_VALUE_AT_END.search(prose_so_far(self._text, _CODE)):
            self.notice = MARKER_AS_VALUE
            return ""
        if not self.cited:
            self.added = quoted_source(self._text, self._texts)  # None for an empty answer: it has no sentence
            if self.added is None:
                self.notice = UNCITED if self._text.strip() else ""
                return ""
            return f"[{self.added}] " + self._release(len(self._text))
        return self._release(len(self._text))

    def _release(self, end: int) -> str:
        shown = self._text[self._released : end] if end > self._released else ""
        self._released = max(self._released, end)
        return shown
