"""Withhold an answer that hands the operator contact details no source has.

A phone number or an email address is acted on as it is: an operator pages the number or
writes to the address. When the answer names one that the passages (and the question) do
not contain, the 1.5B model has made it up from the shape of the sources ("the on-call
admin is Doug Jacobsen, pager 555-1234", built from a Slurm meeting page). Flagging it, as
grounding does for other specifics, still shows the number; so the front ends show this
notice instead of the answer, and the conversation carries the notice, not the invention.
Other unfound specifics (a quantity, a name, a command) stay flagged in a shown answer:
they are claims to check, not an address to use.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.copilot.events import GroundingItem

CONTACT_KINDS = {"phone": "a phone number", "email": "an email address"}
WITHHELD = "The sources do not cover this: the drafted answer named"  # how every notice starts


def withheld_notice(grounding: Sequence[GroundingItem]) -> str:
    """The notice shown in place of the answer, or '' when every contact it names is in the sources."""
    invented = sorted({CONTACT_KINDS[item.kind] for item in grounding if item.kind in CONTACT_KINDS and not item.found})
    if not invented:
        return ""
    named = " and ".join(invented)
    return (
        f"{WITHHELD} {named} that no source contains, so it is not shown. Look the contact up where your site keeps it."
    )
