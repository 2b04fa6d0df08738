"""Links the model copies from Markdown sources, as the front ends show them.

Manuals link their own chapters relatively (Icinga's `[troubleshooting](15-troubleshooting.md#troubleshooting)`),
and answers quote those links. In the chat such a link opened the chat server's own address
(`http://127.0.0.1:7860/15-troubleshooting.md`, not found), and Slack made a link of a bare file name; the
chapter itself is among the answer's listed sources. So a link without a scheme is shown as its text; a web
link (`https://...`, `mailto:`) stays a link.
"""

from __future__ import annotations

import re

LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")  # [text](target); an image's ![alt](...) is no link
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def is_relative(target: str) -> bool:
    """Is a link target a path or anchor of the source's own site (no scheme such as https: or mailto:)?"""
    return not _SCHEME.match(target)


def relative_links_as_text(prose: str) -> str:
    """`prose` (no code in it) with each relative link written as its text."""
    return LINK.sub(lambda m: m.group(1) if is_relative(m.group(2)) else m.group(0), prose)
