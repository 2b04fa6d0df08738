"""A Slack thread as conversation history: earlier messages -> pipeline `Turn(question, answer)`.

Rule: walking the thread oldest first, each message by a person is a question (mentions
of the bot removed, Slack's markup undone); the bot's answer messages after it, each cut
at its footer (render.FOOTER_HEADINGS), joined, are its answer. The bot's queue notices
and error replies are not answers; a question with no answer yet is left out. Messages
at or after the asking message are ignored, as are other bots.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from app.copilot import Turn
from app.copilot.gate import REFUSAL
from app.copilot.withhold import WITHHELD
from app.slack.render import ERROR_PREFIX, FOOTER_HEADINGS, NOTICE_PREFIX, REPEATS_REST, WITHHELD_REST, unescape

_USER_MENTION = re.compile(r"<@([A-Z0-9]+)(?:\|[^>]*)?>")
_CHANNEL = re.compile(r"<#[A-Z0-9]+\|([^>]*)>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!(\w+)(?:\^[^|>]*)?(?:\|([^>]*))?>")


@dataclass(frozen=True)
class BotIdentity:
    user_id: str  # the bot's user id (U...), as in <@U...> mentions
    bot_id: str = ""  # the bot id (B...) on messages it posts


def clean_question(text: str, bot: BotIdentity) -> str:
    """A message's text as plain text: the bot's mention removed, links, channels and entities undone."""
    text = _USER_MENTION.sub(lambda m: "" if m.group(1) == bot.user_id else f"@{m.group(1)}", text)
    text = _CHANNEL.sub(lambda m: f"#{m.group(1)}", text)
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = _SPECIAL.sub(lambda m: m.group(2) or f"@{m.group(1)}", text)
    return unescape(text).strip()


def strip_footer(text: str) -> str:
    """An answer message without its footer (sources, warnings, stats)."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() in FOOTER_HEADINGS]
    if starts:
        lines = lines[: starts[-1]]
    return "\n".join(lines).strip()


def is_from_bot(message: dict, bot: BotIdentity) -> bool:
    return message.get("user") == bot.user_id or bool(bot.bot_id and message.get("bot_id") == bot.bot_id)


def thread_turns(messages: Iterable[dict], bot: BotIdentity, before_ts: str) -> list[Turn]:
    """The finished exchanges of a thread before the message `before_ts` (see the module rule)."""
    turns: list[Turn] = []
    question, parts = None, []
    for message in sorted(messages, key=lambda m: float(m.get("ts", 0))):
        if float(message.get("ts", 0)) >= float(before_ts):
            break
        text = message.get("text") or ""
        if is_from_bot(message, bot):
            if question is not None and not text.startswith((NOTICE_PREFIX, ERROR_PREFIX, WITHHELD_REST, REPEATS_REST)):
                parts.append(unescape(strip_footer(text)))
        elif message.get("bot_id") or message.get("subtype"):
            continue  # other bots, joins, edits
        else:
            if question and parts:
                turns.append(_turn(question, parts))
            question, parts = clean_question(text, bot), []
    if question and parts:
        turns.append(_turn(question, parts))
    return turns


def _turn(question: str, parts: list[str]) -> Turn:
    answer = "\n".join(parts)
    return Turn(question, answer, refused=answer.startswith((REFUSAL, WITHHELD)))  # the copilot's own words
