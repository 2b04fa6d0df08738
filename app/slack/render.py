"""What an answer looks like in Slack: Markdown -> mrkdwn, escaping, splitting, footer, buttons.

Slack parses `<...>` (links, mentions) and `&` entities before any formatting, so `&`, `<`
and `>` in model text are escaped everywhere, code included. Two flavours of the same
answer exist: the native stream takes Markdown (`markdown_text`), a posted or updated
message takes mrkdwn. Both end with the same footer: a `Sources` line, the numbered
sources (title, path), grounding warnings and one stats line. `FOOTER_HEADINGS` marks
where the footer starts, so history.py can cut it off again.
"""

from __future__ import annotations

import re
from typing import Any

from app.copilot import Final
from app.copilot.code_spans import FENCE_LINE, INLINE, joined_spans
from app.copilot.links import LINK, is_relative
from app.copilot.summary import check_notes, shown_paths, source_heading, stats_parts

MESSAGE_LIMIT = 3000  # characters of one message's answer text (a section block holds 3000)
FEEDBACK_ACTION = "specrag_feedback"  # action ids: specrag_feedback_up / specrag_feedback_down
ANYWAY_ACTION = "specrag_answer_anyway"  # under a refusal of the relevance gate: ask again, the gate only warning
FOOTER_HEADINGS = ("*Sources*", "**Sources**")
NOTICE_PREFIX = ":hourglass_flowing_sand:"
ERROR_PREFIX = ":warning: Sorry"
WITHHELD_REST = "_(withheld: see the message above)_"  # a streamed message the withheld notice did not need
REPEATS_REST = "_(left out: the answer repeated itself; see the message above)_"  # ... the collapsed answer

_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")


def escape(text: str) -> str:
    """Slack's three control characters as entities (https://api.slack.com/reference/surfaces/formatting)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def to_mrkdwn(markdown: str) -> str:
    """Markdown as the model writes it -> Slack mrkdwn: bold, italics, strike, links, headings, lists, code."""
    lines, in_code = [], False
    for line in joined_spans(markdown).split("\n"):  # a code span a soft wrap cut stays one span
        if FENCE_LINE.match(line):
            in_code = not in_code
            lines.append("```")  # Slack shows a language tag as text: drop it
        elif in_code:
            lines.append(escape(line))
        else:
            lines.append(_line_to_mrkdwn(line))
    return "\n".join(lines)


def _line_to_mrkdwn(line: str) -> str:
    quote = ""
    if line.startswith("> "):
        quote, line = "> ", line[2:]  # a block quote keeps its literal '>'
    heading = _HEADING.match(line)
    if heading:
        return f"{quote}*{_inline(heading.group(1)).strip('*')}*"
    line = _BULLET.sub(lambda m: f"{m.group(1)}• ", line)
    return quote + _inline(line)


def _inline(text: str) -> str:
    """Format one line outside code blocks; inline code spans are only escaped, and a ``double`` one
    gets Slack's single backticks. The spans are held aside while the rest is formatted, so bold around
    one ("**Probe fails with `failed to download`.**", runbook answers) is bold, not asterisks."""
    codes: list[str] = []

    def hold(span: re.Match) -> str:
        code = span.group("code")
        codes.append(escape(span.group(0) if "`" in code else f"`{code}`"))
        return f"\x02{len(codes) - 1}\x03"

    return _HELD.sub(lambda m: codes[int(m.group(1))], _formatted(INLINE.sub(hold, text)))


_HELD = re.compile(r"\x02(\d+)\x03")  # a held code span's place while the line is formatted


def _formatted(part: str) -> str:
    part = escape(part)
    part = LINK.sub(lambda m: m.group(1) if is_relative(m.group(2)) else f"<{m.group(2)}|{m.group(1)}>", part)
    part = _BOLD.sub(lambda m: "\0" + m.group(2) + "\0", part)  # hold bold while italics change
    part = _ITALIC.sub(lambda m: f"_{m.group(1)}_", part)
    part = _STRIKE.sub(lambda m: f"~{m.group(1)}~", part)
    return part.replace("\0", "*")


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Cut text into pieces of at most `limit` characters at paragraph, line or word ends.

    A piece that ends inside a code block closes it, and the next piece reopens it.
    """
    pieces: list[str] = []
    while len(text) > limit:
        cut = cut_point(text, limit - 4 if limit > 16 else limit)  # room for a closing fence
        piece, text = text[:cut].rstrip("\n"), text[cut:].lstrip("\n")
        if piece.count("```") % 2:
            piece, text = piece + "\n```", "```\n" + text
        pieces.append(piece)
    if text or not pieces:
        pieces.append(text)
    return pieces


def cut_point(text: str, limit: int) -> int:
    for separator in ("\n\n", "\n", " "):
        cut = text.rfind(separator, 0, limit)
        if cut > limit // 2:
            return cut + len(separator)
    return max(limit, 1)


def stats_line(final: Final) -> str:
    return " · ".join(stats_parts(final))


def footer(final: Final, markdown: bool = False) -> str:
    """Sources (numbered: title, path), grounding warnings and the stats line."""
    bold, code = ("**", "`") if markdown else ("*", "`")
    lines = [f"{bold}Sources{bold}"]
    paths = shown_paths(final.sources)
    for source in final.sources:
        title = escape(source["title"] or source["path"])
        heading = source_heading(source, escape)
        lines.append(f"{source['number']}. {title}{heading} — {code}{escape(paths[source['number']])}{code}")
    if not final.sources:
        lines.append("none: the answer is not grounded in the runbooks")
    # escaped whole: besides code, a note quotes the answer and the sources (a definition's "<job(.step)>")
    for level, text in check_notes(final, code=lambda text: f"{code}{text}{code}"):
        lines.append(f":warning: {escape(text)}" if level == "warning" else escape(text))
    lines.append(f"_{stats_line(final)}_")
    return "\n".join(lines)


def feedback_blocks(answer_key: str, refused: bool = False) -> list[dict[str, Any]]:
    """Thumbs up/down buttons whose value names the answer (see bot.py's feedback handler), and under a refusal of
    the relevance gate (`refused`) an "Answer anyway" button that asks the question again (bot.py's on_anyway)."""
    buttons = [
        _button(f"{FEEDBACK_ACTION}_{rating}", emoji, answer_key)
        for rating, emoji in (("up", ":+1:"), ("down", ":-1:"))
    ]
    if refused:
        buttons.append(_button(ANYWAY_ACTION, "Answer anyway", answer_key))
    return [{"type": "actions", "block_id": "specrag_feedback", "elements": buttons}]


def anyway_taken(blocks: list[dict[str, Any]], text: str, note: str) -> list[dict[str, Any]]:
    """A refusal's blocks once its "Answer anyway" was clicked: the button gone, the thumbs kept, `note` under them
    (a button left live invites a second click that can only be turned away). A streamed refusal may hold its words
    in `text` alone, beside the buttons; they go into a markdown block first, so the update keeps them."""
    if all(block.get("type") in ("actions", "context") for block in blocks) and text.strip():
        blocks = [{"type": "markdown", "text": text}, *blocks]
    kept = []
    for block in blocks:
        if block.get("type") == "actions":
            block = block | {"elements": [e for e in block.get("elements", []) if e.get("action_id") != ANYWAY_ACTION]}
            if not block["elements"]:
                continue
        kept.append(block)
    return [*kept, {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}]


def _button(action_id: str, text: str, value: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text, "emoji": True},
        "value": value,
    }


def message_blocks(text: str, answer_key: str | None = None, refused: bool = False) -> list[dict[str, Any]]:
    """A posted message as blocks: its text in one section, and the buttons (`feedback_blocks`) on the last part."""
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text or " "}}]
    return blocks + feedback_blocks(answer_key, refused) if answer_key else blocks


def queue_notice(position: int) -> str:
    ahead = "1 question is" if position == 1 else f"{position} questions are"
    return f"{NOTICE_PREFIX} {ahead} ahead of yours (you are #{position} in the queue); I'll answer here."


def error_text(reason: str) -> str:
    return f"{ERROR_PREFIX}, I could not answer this: {escape(reason)}"
