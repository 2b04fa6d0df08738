"""What every front end says under an answer, worded once: the stats line and the checks.

`specrag ask`, Slack and the web chat lay these out in their own markup; the words, their
order and which of them a withheld or gated answer shows are decided here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from app.copilot.events import (
    CutCode,
    Definition,
    ExampleFact,
    Final,
    GroundingItem,
    Miscomparison,
    MisplacedSetting,
    Quote,
    Recitation,
    Splice,
    UnlistedValue,
)
from app.copilot.gate import weak_match_warning, why_refused
from app.copilot.source_paths import short_paths

Level = Literal["warning", "note"]
MAX_LISTED = 8  # values of an option's list named in a warning; sinfo's --states lists thirty


def stats_parts(final: Final) -> list[str]:
    """Tokens, tok/s, tokens per pass, share copied, draft acceptance, first token, speculation, finish.

    An answer decoded without speculation (`speculation none`, as on `llamacpp-f16`) leaves out the
    drafting figures: "copied 0%" under an answer the provenance shows quoted word for word misled.
    A gated answer ran no model: its only part is the gate's reason for refusing it."""
    if final.gated:
        return [why_refused(final.relevance)]
    s = final.stats
    parts = [f"{s.get('new_tokens', 0)} tokens", f"{s.get('decode_tokens_per_s', 0.0):.1f} tok/s"]
    if s.get("speculation") != "none":  # decoded plainly: one token a pass, nothing copied or accepted
        acceptance = f"{s.get('acceptance_rate', 0.0):.0%}" if sum((s.get("drafted") or {}).values()) else "n/a"
        parts += [
            f"{s.get('tokens_per_pass', 0.0):.2f} tokens/pass",
            f"copied {s.get('copied_share', 0.0):.0%}",
            f"acceptance {acceptance}",
        ]
    if "time_to_first_token_s" in s:
        parts.append(f"first token {s['time_to_first_token_s']:.1f} s")
    if s.get("speculation"):
        parts.append(f"speculation {s['speculation']}")
    parts.append(final.finish_label)
    return parts


REPEATED_EARLIER = (
    "this answer says again, word for word, what an earlier answer of the conversation said, so it may not "
    "answer this question: ask it again on its own, in a new conversation, or in other words"
)


def check_notes(final: Final, code: Callable[[str], str]) -> list[tuple[Level, str]]:
    """The checks an operator should read before acting on the answer, as (level, text).

    `code` renders a command or option the way the front end shows code (it also escapes it).
    A withheld answer's items are not listed: its text is not shown, an invented contact least
    of all. The weak-match warning of `--gate warn` always is."""
    notes: list[tuple[Level, str]] = []
    if warning := weak_match_warning(final.relevance, final.gated):
        notes.append(("warning", warning))
    if final.withheld:
        return notes
    if final.repeats_earlier:
        notes.append(("warning", REPEATED_EARLIER))
    if final.cut_code:
        notes.append(("warning", cut_command(final.cut_code, code)))
    for item in final.ungrounded:
        nearest = f"; nearest in [{item.nearest_source}]: {code(item.nearest)}" if item.nearest else ""
        why = why_not_found(item, code)
        notes.append(("warning", f"{item.kind} {code(item.text)} is not found in the sources{why}{nearest}"))
    notes += [("warning", borrowed(sentence, word)) for sentence, word in final.borrowed]
    notes += [("note", left_out(sentence, run)) for sentence, run in final.left_out]
    notes += [("note", said_earlier(final.said_before))] if final.said_before else []
    notes += [("warning", splice(spliced)) for spliced in final.spliced]
    notes += [("warning", miscomparison(wrong)) for wrong in final.miscompared]
    notes += [("warning", example_fact(told)) for told in final.example_facts]
    notes += [("warning", misplaced(setting, code)) for setting in final.misplaced]
    notes += [("warning", unlisted_value(unlisted, code)) for unlisted in final.unlisted]
    notes += [("note", recitation(recited)) for recited in final.recitations]
    notes += [("note", misattribution(item, code)) for item in final.misattributed]
    notes += [("note", misquotation(quote)) for quote in final.misquoted]
    notes += [("note", adapted(item, code)) for item in final.adapted]
    notes += [("warning", example_kept(item, code)) for item in final.with_examples]
    notes += [("note", run_under_tool(item, code)) for item in final.without_tool]
    notes += [("note", assembled(item, code)) for item in final.assembled]
    if final.citations.invalid:
        notes.append(("warning", f"the answer cites passages that do not exist: {final.citations.invalid}"))
    notes += [("note", definition(defined, code)) for defined in final.definitions]
    return notes


def why_not_found(item: GroundingItem, code: Callable[[str], str]) -> str:
    """Why an unfound item cannot be right: its tool takes no such command (grounding.py's `unknown_command`),
    or it has words of the prompt's worked example (borrowed.py's `with_example_words`); '' otherwise."""
    why = ""
    if item.not_a_command:
        tool = item.text.split()[0]
        why = f": {code(tool)} has no command {code(item.not_a_command)} (its man page lists the ones it takes)"
    if item.from_example:
        words = ", ".join(code(word) for word in item.from_example)
        why += f"{'; ' if why else ': '}{words} {'is' if len(item.from_example) == 1 else 'are'} from the prompt's "
        why += "worked example, not from a source"
    return why


def adapted(item: GroundingItem, code: Callable[[str], str]) -> str:
    """A found item that fills a source's command or option with the user's own values (grounding.py), naming
    the values that the question does not give either: those the model chose, the likeliest to be wrong."""
    if item.unasked:
        values = ", ".join(code(value) for value in item.unasked)
        return (
            f"{code(item.text)} is a source's {item.kind} with values that neither the sources nor your question "
            f"give ({values}); check them"
        )
    return f"{code(item.text)} is a source's {item.kind} with your own values; check them"


def example_kept(item: GroundingItem, code: Callable[[str], str]) -> str:
    """A found item that keeps a source's example value where the question named the user's own
    (example_values.py): it would act on the example's job, node or hour."""
    kept = "; ".join(f"{code(theirs)} where your question gives {code(yours)}" for theirs, yours in item.examples)
    return f"{code(item.text)} keeps the sources' example value {kept}: put yours in before running it"


def definition(
    defined: Definition, code: Callable[[str], str], words: Callable[[str], str] = str, width: int = 160
) -> str:
    """What a source says an option of the answer does, so a real option used for the wrong purpose shows
    (definitions.py). `words` renders the page's own words (the front end's escaping)."""
    page = f" ({words(defined.title)})" if defined.title else ""
    if defined.said_of:  # a source's sentence told of another setting (swapped.py)
        return (
            f"“{words(_cut(defined.quoted, 60))}” is what [{defined.source}]{page} says of {code(defined.term)}, "
            f"not of {code(defined.said_of)}: check it"
        )
    if defined.value:  # a value of the question against a source's thresholds (thresholds.py)
        return f"your {words(defined.value)}, against [{defined.source}]{page}: “{words(_cut(defined.text, width))}”"
    if defined.quoted:  # the answer quotes an entry it never names: say whose words they are
        return (
            f"“{words(_cut(defined.quoted, 60))}” is how [{defined.source}]{page} describes {code(defined.name)}, "
            "which neither the question nor the answer names: check it is the one you asked about"
        )
    if not defined.source:  # from the tool's own page in the index (tool_pages.py): no passage to open
        where = f"{words(defined.title)}'s page defines it, in an entry no passage holds"
        return f"{code(defined.name)}, as {where}: “{words(_cut(defined.text, width))}”"
    return f"{code(defined.name)}, as [{defined.source}]{page} defines it: “{words(_cut(defined.text, width))}”"


def misattribution(item: GroundingItem, code: Callable[[str], str]) -> str:
    """Where an item copied under the wrong [n] really is (attribution.py)."""
    holders, cited = (", ".join(f"[{n}]" for n in numbers) for numbers in (item.holders, item.cited))
    return f"{code(item.text)} is in {holders}, not in {cited} that its sentence cites"


def assembled(item: GroundingItem, code: Callable[[str], str]) -> str:
    """A found item that no source writes as such: put together from one source's words (grounding.py)."""
    sources = ", ".join(f"[{n}]" for n in item.built_from)
    return f"{code(item.text)} is written so in no source: it is put together from words of {sources}; check it"


def run_under_tool(item: GroundingItem, code: Callable[[str], str]) -> str:
    """How to run a tool's command the answer copied without the tool (subcommands.py).

    Not "run it as `scontrol topology`": a man page may list it inside another command's entry
    (`topology` is an entity of `scontrol show`), so the source gives its exact form."""
    return (
        f"{code(item.text)} is listed among {item.tool}'s commands: type it after {code(item.tool)}, "
        "not on its own (its source gives the exact form)"
    )


def left_out(sentence: str, run: str, width: int = 60) -> str:
    """A sentence the shown answer leaves out: it copies `run` from the prompt's worked example (borrowed.py)."""
    return f"left out “{_cut(sentence, width)}”: it repeats “{run}” from the prompt's worked example, not the sources"


def said_earlier(sentences: Sequence[str], width: int = 60) -> str:
    """The sentences the shown answer leaves out because an earlier answer of the conversation said them
    (said_before.py), in one note: the chat showed six lines of notes for one follow-up."""
    if len(sentences) == 1:
        return f"left out “{_cut(sentences[0], width)}”: an earlier answer above says it, word for word"
    return (
        f"left out {len(sentences)} sentences that an earlier answer above says word for word "
        f"(“{_cut(sentences[0], width)}” and more)"
    )


def borrowed(sentence: str, word: str, width: int = 60) -> str:
    """A sentence that took its topic, or a run of its words, from the prompt's worked example, not from the
    sources (borrowed.py): `word` is the topic word or the run."""
    if " " in word:
        return (
            f"“{_cut(sentence, width)}” repeats “{word}” from the prompt's worked example: it is not from the sources"
        )
    return (
        f"“{_cut(sentence, width)}” speaks of “{word}”, which only the prompt's worked example does: "
        "it is not from the sources"
    )


def cut_command(cut: CutCode, code: Callable[[str], str]) -> str:
    """A command the length limit cut mid-line (cut_code.py), with where a source writes it whole."""
    said = f"the length limit cut the answer in the middle of {code(cut.written)}: do not run it as it stands"
    return f"{said}; [{cut.source}] writes it whole: {code(cut.whole)}" if cut.whole else said


def misplaced(setting: MisplacedSetting, code: Callable[[str], str], words: Callable[[str], str] = str) -> str:
    """A setting put in a configuration file whose pages never name it (config_files.py). `words` renders the page's
    title (the front end's escaping)."""
    said = f"the answer puts {code(setting.key)} in {code(setting.file)}, whose man page never names it"
    page = f" ({words(setting.title)})" if setting.title else ""
    return f"{said}; [{setting.source}]{page} defines it: check where it is set" if setting.source else said


def unlisted_value(unlisted: UnlistedValue, code: Callable[[str], str], words: Callable[[str], str] = str) -> str:
    """A value the answer gives an option whose entry lists its values, and not that one (option_values.py). `words`
    renders the page's title (the front end's escaping)."""
    more = len(unlisted.listed) - MAX_LISTED
    listed = [*unlisted.listed[:MAX_LISTED], *([f"{more} more"] if more > 0 else [])]
    choices = ", ".join(listed[:-1]) + f" or {listed[-1]}" if len(listed) > 1 else listed[0]
    where = (
        f"[{unlisted.source}] ({words(unlisted.title)}) lists"
        if unlisted.source
        else f"{words(unlisted.tool)}'s page lists, in an entry no passage holds"
    )
    return (
        f"the answer gives {code(unlisted.option)} of {code(unlisted.tool)} the value {code(unlisted.value)}, "
        f"which is not one of those {where}: {choices}; {words(unlisted.tool)} will not take it as it stands"
    )


def example_fact(told: ExampleFact) -> str:
    """A sentence telling the question's own value what a source's example gives (example_facts.py)."""
    values = ", ".join(told.theirs)
    if told.reserved:
        where = f"[{told.source}] uses it as" if told.source else "it is"
        return (
            f"the answer gives {values} for your {told.own}: {where} an example reserved for documentation, not a "
            f"real one; the sources cannot know yours"
        )
    if not told.source:  # values of the model's own
        return f"the answer tells of your {told.own} what no source gives ({values}): check it yourself"
    return (
        f"the answer tells your {told.own} what [{told.source}]'s example gives for its own ({values}): "
        f"no source can know that of {told.own}; check it yourself"
    )


def miscomparison(wrong: Miscomparison) -> str:
    """Two quantities the answer compares the wrong way round (comparisons.py)."""
    return f"the answer says {wrong.first} is {wrong.relation} {wrong.second}: it is not; check it before acting on it"


def splice(spliced: Splice, width: int = 50) -> str:
    """A sentence that joins words of two different items of one source (splices.py)."""
    if spliced.rows:
        first, second = (_cut(row, width) for row in spliced.rows)
        return (
            f"“{_cut(spliced.first, width)}” and “{_cut(spliced.second, width)}” come from two rows of "
            f"[{spliced.source}]'s table, “{first}” and “{second}”, joined in one sentence: check which row is "
            "your case before acting on it"
        )
    return (
        f"“{_cut(spliced.first, width)}” and “{_cut(spliced.second, width)}” come from two different items of "
        f"[{spliced.source}], joined in one sentence: read [{spliced.source}] before acting on it"
    )


def recitation(recited: Recitation, width: int = 60) -> str:
    """A sentence shown citing the source it quotes instead of the one the model wrote (recite.py)."""
    written = ", ".join(f"[{n}]" for n in recited.written)
    now = f"[{recited.now}]"
    if not written:  # an uncited answer that quotes one passage throughout (withhold.quoted_source)
        return f"citation added: {now} (the model cited no source): “{_cut(recited.evidence, width)}” is in {now}"
    return f"citation corrected to {now} (the model wrote {written}): “{_cut(recited.evidence, width)}” is in {now}"


def misquotation(quote: Quote, width: int = 60) -> str:
    """Where words quoted under the wrong [n] really are (attribution.py)."""
    text = _cut(quote.text, width)
    holders, cited = (", ".join(f"[{n}]" for n in numbers) for numbers in (quote.holders, quote.cited))
    return f"“{text}” is quoted from {holders}, not from {cited} that its sentence cites"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def source_heading(source: dict[str, Any], escape: Callable[[str], str] = str) -> str:
    """' › heading › entry' of a listed source (Final.sources), each through the front end's `escape`: every
    sources list names the section and the entry (an option, a command) a passage goes on with."""
    return "".join(f" › {escape(source[key])}" for key in ("heading", "entry") if source.get(key))


def source_marks(source: dict[str, Any]) -> list[str]:
    """The marks a listed source (Final.sources) carries in every sources list: cited, and how many
    answer tokens the drafter copied from it."""
    copied = source.get("copied_tokens") or 0
    return (["cited"] if source.get("cited") else []) + (
        [f"{copied} token{'' if copied == 1 else 's'} copied"] if copied else []
    )


def shown_paths(sources: Sequence[dict[str, Any]]) -> dict[int, str]:
    """Source number -> its path as an operator reads it (source_paths.short_paths)."""
    return dict(zip([s["number"] for s in sources], short_paths([s["path"] for s in sources]), strict=True))
