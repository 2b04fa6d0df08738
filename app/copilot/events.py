"""What the pipeline streams: Status, Token and Final events, and the records they carry.

Every front end (ask, bench, the web chat, Slack, eval) renders this stream and reaches
nothing below it. A stream is zero or more Status events, then Token events, then exactly
one Final event (unless it raised a SpecragError or the consumer stopped early).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from app.copilot.repeats import shown_answer, without_sentences

STAGES = ("searching", "passages", "checking", "prefilling", "generating")


@dataclass(frozen=True)
class Passage:
    """A numbered context passage as the model saw it ([number] in the prompt)."""

    number: int
    text: str
    source: str  # path of the document
    title: str = ""
    heading: str = ""
    score: float | None = None  # fused retrieval score; None for given passages
    chunk_id: str = ""
    similarity: float | None = None  # dense cosine to the query, what the relevance gate reads
    entry: str = ""  # the definition-list term the passage goes on with (retrieval/chunking.py's Chunk.entry)

    def label_parts(self, name: str) -> list[str]:
        """Its title (`name` when it has none), heading and entry, those it has: the prompt and the gate's
        refusal join them into 'title › heading › entry'."""
        return [part for part in (self.title or name, self.heading, self.entry) if part]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Turn:
    """One earlier exchange of a conversation; passages are those its question was shown with."""

    question: str
    answer: str
    passages: tuple[Passage, ...] = ()
    refused: bool = False  # the relevance gate refused it: no topic a follow-up could continue
    # it was searched alone after earlier turns, so its prompt kept them bare: later prompts keep them bare too
    # (a refused or withheld turn has no passages numbered from [1] to tell it by: app/copilot/conversation.py)
    kept_earlier_bare: bool = False


@dataclass(frozen=True)
class Status:
    stage: str  # one of STAGES
    message: str  # what a front end shows, e.g. "reading 6 passages (812 prompt tokens)"
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Token:
    text: str  # text delta (may be empty while a stop string is held back)
    token_ids: list[int]
    origins: list[str]  # per token: "target", "model", "passage:N", "answer:T" or "context"
    stats: dict[str, Any]  # running stats, as in Final.stats


@dataclass(frozen=True)
class Segment:
    """A piece of the answer text and the passage it was copied from (None: written by the model)."""

    text: str
    passage: int | None = None


@dataclass(frozen=True)
class GroundingItem:
    """A command, option, path, code span or specific of the answer, and whether a passage has it (grounding.py)."""

    text: str
    kind: str  # "code", "command", "option", "path", or a specific: "email", "url", "phone", "version"...
    found: bool
    nearest: str = ""  # not found: the closest line or option a passage does have (nearest.py), if any
    nearest_source: int | None = None  # ... and that passage's number
    adapted: bool = False  # found with the user's own values (numbers, <placeholders>, the question's words)
    unasked: tuple[str, ...] = ()  # adapted: its values that neither a source nor the question writes (grounding.py)
    holders: tuple[int, ...] = ()  # found verbatim: the passages that hold it (attribution.py)
    cited: tuple[int, ...] = ()  # the markers of the sentence it stands in, () if that cites none
    tool: str = ""  # not '': a command of this tool, copied without it from its man page (subcommands.py)
    built_from: tuple[int, ...] = ()  # found, though no passage writes it: the passages whose pieces make it up
    # found: (a source's example value, the question's own values) it kept in their place (example_values.py)
    examples: tuple[tuple[str, str], ...] = ()
    # not found: the word after its tool that is none of the tool's commands, `change` in `scontrol change`
    not_a_command: str = ""
    # not found: its words that the prompt's worked example's command has and no source or question does
    # (`/srv/restore`: borrowed.py)
    from_example: tuple[str, ...] = ()

    @property
    def assembled(self) -> bool:
        """Found only as put together from one passage's words, with no value of the user's: no source writes
        it so (`sdiag backfill` from the sdiag page's words), so it is worth a check before it is run."""
        return self.found and not self.adapted and not self.holders and bool(self.built_from)

    @property
    def judged(self) -> bool:
        """Found verbatim in a sentence that cites a source: attribution.py can say if that source holds it."""
        return bool(self.cited and self.holders)

    @property
    def misattributed(self) -> bool:
        """Its sentence cites only sources that do not hold it, while another one does."""
        return self.judged and not set(self.cited) & set(self.holders)


@dataclass(frozen=True)
class Quote:
    """Words quoted verbatim from `holders` in a sentence that cites `cited` (attribution.py)."""

    text: str
    cited: tuple[int, ...]
    holders: tuple[int, ...]

    @property
    def misattributed(self) -> bool:
        """Its sentence cites only sources that do not hold it."""
        return not set(self.cited) & set(self.holders)


@dataclass(frozen=True)
class Definition:
    """What passage `source` (page `title`) says an option, setting or subcommand the answer uses does
    (definitions.py): `text`, the first sentence of the entry headed `term` (`-M, --clusters=<string>`). Source 0:
    the tool's own page `title` in the index, which no passage holds (tool_pages.py).
    With `quoted`, the answer quotes these words of the entry's without naming it (neighbour_quotes.py)."""

    name: str
    term: str
    source: int
    title: str
    text: str
    quoted: str = ""
    value: str = ""  # not '': a threshold (thresholds.py), the question's value; `text` is the row it falls in
    said_of: str = ""  # not '': the answer tells `quoted`, `term`'s words in `text`, of this setting (swapped.py)


@dataclass(frozen=True)
class Splice:
    """A sentence joining quotes of two different items of passage `source`, `first` then `second` (splices.py);
    `rows`, the labels of the two table rows they come from, when the items are a table's rows."""

    first: str
    second: str
    source: int
    rows: tuple[str, str] | None = None


@dataclass(frozen=True)
class CutCode:
    """The command `written` as far as the length limit let the answer write it (cut_code.py); `whole`, the line
    passage `source` writes that it is the start of (0 and '' when none is)."""

    written: str
    source: int = 0
    whole: str = ""


@dataclass(frozen=True)
class MisplacedSetting:
    """A setting `key` the answer puts in configuration file `file`, whose pages never name it (config_files.py);
    `source` and `title`, the passage that defines it (0 and '' when none does)."""

    key: str
    file: str
    source: int = 0
    title: str = ""


@dataclass(frozen=True)
class UnlistedValue:
    """A word `value` the answer's line gives option `option` of `tool`, which the option's entry does not hold among
    the values it lists (`listed`, upper case: option_values.py); `source` and `title`, the passage with that entry
    (0 and the tool's page title when only the tool's page in the index has it)."""

    tool: str
    option: str
    value: str
    listed: tuple[str, ...]
    source: int = 0
    title: str = ""


@dataclass(frozen=True)
class ExampleFact:
    """A sentence of the answer that names the question's value `own` (with the question's word for it: "job
    4512") and tells it `theirs`, values passage `source` gives for its own example (example_facts.py); or, when
    `reserved`, gives the question's "our ..." (`own`: "central log server") a documentation example's name."""

    sentence: str
    own: str
    theirs: tuple[str, ...]
    source: int
    reserved: bool = False  # `theirs` are names or addresses reserved for documentation (documentation_values.py)


@dataclass(frozen=True)
class Miscomparison:
    """`first` said to be `relation` ("above" or "below") `second`, which it is not (comparisons.py)."""

    first: str
    relation: str
    second: str


@dataclass(frozen=True)
class Recitation:
    """A sentence shown citing [now] in place of the markers the model `written` (recite.py): `evidence`, a
    quote or command of the sentence, and all the rest of what it quotes, are in [now] and in none of those."""

    written: tuple[int, ...]
    now: int
    evidence: str


@dataclass(frozen=True)
class Citations:
    markers: list[int]  # the [n] numbers the answer wrote, in order of first use
    invalid: list[int]  # markers that name no passage in the prompt
    copied: dict[int, int]  # passage number -> tokens copied verbatim from it by the drafter
    segments: list[Segment]  # the answer text split by provenance
    # the drafter's copies as (start, end, passage) character spans of the answer as written: what a saved answer
    # needs to be scored again with its live provenance (app/eval/rescore.py), since its tokens are not saved
    spans: tuple[tuple[int, int, int], ...] = ()

    @property
    def valid(self) -> list[int]:
        return [n for n in self.markers if n not in self.invalid]


FINISH_LABELS = {
    "repeat": "stopped: the answer was repeating itself",
    "length": "cut at the length limit",
    "withheld": "stopped: withheld, see the notice",
    "past_sources": "stopped: the answer went on to a source that does not exist",
    "unnumbered": "stopped: the answer wrote [n] where a source's number belongs",
}


@dataclass(frozen=True)
class Final:
    question: str
    answer: str
    # "eos" | "length" | "stop" | "repeat" | "gated" | "withheld" (stopped where it was withheld) | "past_sources"
    # (stopped at a line opening with a source number past the last source: pipeline.past_the_sources) |
    # "unnumbered" (stopped where it cited by the prompt's [n] placeholder: unnumbered.py)
    finish_reason: str
    passages: list[Passage]  # every passage in the prompt (this turn's and the history's)
    sources: list[dict[str, Any]]  # passages cited or copied from, with title, heading, path, score
    citations: Citations
    grounding: list[GroundingItem]
    stats: dict[str, Any]
    prompt_ids: list[int]
    output_ids: list[int]
    origins: list[str]
    turn: Turn  # hand this back in `history` for a follow-up
    models: dict[str, Any] = field(default_factory=dict)
    relevance: dict[str, Any] | None = None  # the gate's reading: similarity, threshold, covered
    gated: bool = False  # True: refused by the relevance gate, no model ran
    # not '': shown in place of the answer, which names a contact or version no source has, cites no
    # source, or writes the prompt's [n] placeholder as a value (withhold.py)
    withheld: str = ""
    quotes: list[Quote] = field(default_factory=list)  # prose quotes in sentences that cite a source
    recitations: list[Recitation] = field(default_factory=list)  # sentences shown citing the source they quote
    recited: str = ""  # not '': the shown answer with those sentences' markers moved (recite.py)
    # (sentence, topic word or copied run): sentences taken from the prompt's worked example (borrowed.py)
    borrowed: list[tuple[str, str]] = field(default_factory=list)
    # (sentence, copied run): sentences left out of the shown answer, copied from the worked example (borrowed.py)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    # sentences left out of the shown answer because an earlier answer of the conversation said them (said_before.py)
    said_before: list[str] = field(default_factory=list)
    # what the sources say the options and settings of the answer's code do (definitions.py)
    definitions: list[Definition] = field(default_factory=list)
    # sentences joining quotes of two different items of one source (splices.py)
    spliced: list[Splice] = field(default_factory=list)
    # two quantities of one unit compared the wrong way round ("31 °C, which is above ... 32 °C": comparisons.py)
    miscompared: list[Miscomparison] = field(default_factory=list)
    example_facts: list[ExampleFact] = field(default_factory=list)  # example_facts.py
    cut_code: CutCode | None = None  # the command the length limit cut mid-line (cut_code.py)
    misplaced: list[MisplacedSetting] = field(default_factory=list)  # config_files.py
    unlisted: list[UnlistedValue] = field(default_factory=list)  # option_values.py
    # it says again, word for word, what an earlier answer of the conversation said (repeats.py): it may not
    # answer this question
    repeats_earlier: bool = False

    @property
    def finish_label(self) -> str:
        """How the answer ended, for people: the finish reason, spelled out where it is not obvious."""
        return FINISH_LABELS.get(self.finish_reason, self.finish_reason)

    @property
    def shown(self) -> str:
        """What the front ends show: the answer (each sentence once if it was stopped for repeating
        itself: repeats.py; citing the sources it quotes: recite.py; without the sentences it copied from the
        prompt's worked example: borrowed.py, or that an earlier answer said: said_before.py), or the notice that
        withholds it."""
        if self.withheld or self.recited:
            return self.withheld or self.recited
        left_out = [*(s for s, _ in self.left_out), *self.said_before]
        return without_sentences(shown_answer(self.answer, self.finish_reason), left_out)

    @property
    def ungrounded(self) -> list[GroundingItem]:
        return [item for item in self.grounding if not item.found]

    @property
    def misattributed(self) -> list[GroundingItem]:
        """Items copied from a source other than the one their sentence cites (attribution.py)."""
        return [item for item in self.grounding if item.misattributed]

    @property
    def misquoted(self) -> list[Quote]:
        """Prose quoted from a source other than the one its sentence cites (attribution.py)."""
        return [quote for quote in self.quotes if quote.misattributed]

    @property
    def adapted(self) -> list[GroundingItem]:
        """Found items that fill a source's command or option with the user's own values: check the values. An item
        giving an option a value its entry does not list is not one: that value is wrong (`unlisted`)."""
        return [item for item in self.grounding if item.found and item.adapted and not self._gives_unlisted(item)]

    def _gives_unlisted(self, item: GroundingItem) -> bool:
        return any(
            value.option in item.text and re.search(rf"(?<![\w-]){re.escape(value.value)}(?![\w-])", item.text)
            for value in self.unlisted
        )

    @property
    def assembled(self) -> list[GroundingItem]:
        """Found items that no source writes as such: put together from one source's words (grounding.py)."""
        return [item for item in self.grounding if item.assembled]

    @property
    def with_examples(self) -> list[GroundingItem]:
        """Found items that keep a source's example value where the question named its own (477 for job 4711)."""
        return [item for item in self.grounding if item.examples]

    @property
    def without_tool(self) -> list[GroundingItem]:
        """Found commands that run under a tool the answer left out (`hold <job_list>` of scontrol)."""
        return [item for item in self.grounding if item.tool]

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record.pop("turn")
        record["shown"] = self.shown
        record["citations"]["valid"] = self.citations.valid
        return record


Event = Status | Token | Final
