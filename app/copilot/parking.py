"""A conversation's KV cache set aside while a prompt that shares less of it is computed, then put back.

The target's cache holds one sequence, and one engine serves every chat session and Slack thread. A question
from another conversation has a prompt that shares only the fixed prefix with this one's, so computing it
drops this conversation's turns from the cache, and its next follow-up prefilled all of them again:
`bench_conversation`'s question back in the first conversation after a second one's first question computed
2,426 of its 2,831 prompt tokens (12.8 s to the first token on the runbooks, session 45), 988 with parking
(6.8 s). Within one conversation, a question searched alone keeps the earlier turns bare in every later
prompt (conversation.py), so the question after it goes on from its prompt, not from the parked one.

So before a prompt drops at least PARK_MIN_TOKENS of the cached prompt, the cache is copied out as the runner
serialises it (~29 KB a token for the default target on llama.cpp, 57 KB in the torch paths' float32), with
where its prompts began to be computed (pipeline.py's fixed pieces); a later prompt that shares at least
PARK_MIN_TOKENS more with the parked prompt than with the cache loads it back and goes on from there. The
loaded cache is the computed one, bit for bit, and its pieces are the same, so the answer is the one the
conversation would have got had nothing come between, also on llamacpp-f16, whose logits depend on how a
prompt is split into passes. The most recent caches are kept, up to PARKED_POSITIONS together (putting one back
parks the cache it replaces): five or so conversations of the default target can take turns, where a count of
two (session 45) lost the oldest of four. A Copilot that never goes back to a conversation (`specrag eval`,
the gate calibration) parks nothing (`CopilotOptions.park_positions` = 0), and neither does a runner that cannot
copy its cache out (a torch model with a sliding-window cache; the torch paths copy theirs out since session
62: kv_cache.cache_bytes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from generation.prefix_store import stateful
from generation.token_ids import common_prefix_length

# Fewer dropped tokens than this are prefilled again (~0.5 s on 2 cores) rather than copied out and kept.
PARK_MIN_TOKENS = 128
# Positions of the caches kept at once, counted in positions rather than bytes so that as many conversations
# take turns on every path: 9,216 is 256 MB of the default target's cache on llama.cpp (~55 MB for a 1,900-token
# conversation) and 513 MB in the torch paths' float32 (where 256 MB kept one 3,000-token conversation: back in
# the first of four took 17.5 s instead of ~8, session 62). One conversation of any length (8,192) fits.
PARKED_POSITIONS = 9216


@dataclass(frozen=True)
class Parked:
    tokens: list[int]  # what the cache held: the last prompt, then what was generated after it
    snapshot: int  # how many of `tokens` were that prompt, the part a later prompt can reuse
    payload: memoryview  # the cache as the runner serialised it (state_bytes)
    piece_starts: list[int]  # where the prompts in the cache began to be computed (pipeline.py)
    pieces_of: list[int]  # the last of those prompts


def park(target: Any, keep: int, piece_starts: Sequence[int], pieces_of: Sequence[int]) -> Parked | None:
    """The cache of `target`, copied out, when keeping only its first `keep` prompt positions would drop at
    least PARK_MIN_TOKENS of them and the runner can copy it out; else None."""
    if not stateful(target) or target.snapshot_length - keep < PARK_MIN_TOKENS:
        return None
    tokens = list(target.tokens)
    return Parked(tokens, target.snapshot_prefix(tokens), target.state_bytes(), list(piece_starts), list(pieces_of))


def put_back(target: Any, parked: Parked) -> bool:
    """Load `parked` into `target`'s cache, its last prompt as the reusable part; False (an empty cache) if the
    runner refused it."""
    if not target.load_state(parked.tokens, parked.payload):
        return False
    target.trim_snapshot(parked.snapshot)
    return True


class ParkingLot:
    """The caches set aside, most recent first, as many as fit in `budget` positions together (0: none)."""

    def __init__(self, budget: int = PARKED_POSITIONS) -> None:
        self.budget = budget
        self.parked: list[Parked] = []

    def park(self, target: Any, keep: int, piece_starts: Sequence[int], pieces_of: Sequence[int]) -> None:
        """Set the cache of `target` aside if keeping only `keep` prompt positions would drop enough (`park`),
        then leave out the oldest caches until the rest fit the budget."""
        parked = park(target, keep, piece_starts, pieces_of) if self.budget > 0 else None
        if parked is None:
            return
        kept, total = [], 0
        for entry in [parked, *self.parked]:
            total += len(entry.tokens)
            if total > self.budget:
                break
            kept.append(entry)
        self.parked = kept

    @property
    def positions(self) -> int:
        return sum(len(entry.tokens) for entry in self.parked)

    @property
    def nbytes(self) -> int:
        return sum(entry.payload.nbytes for entry in self.parked)

    def take(self, target: Any, prompt_ids: Sequence[int]) -> Parked | None:
        """The parked cache whose prompt `prompt_ids` go on from furthest, out of the lot, when they share at
        least PARK_MIN_TOKENS more with it than with the cache; else None."""
        if not self.parked:
            return None
        shared, best = max(
            ((min(common_prefix_length(p.tokens, prompt_ids), p.snapshot), p) for p in self.parked),
            key=lambda pair: pair[0],
        )
        if shared < target.snapshot_prefix(list(prompt_ids)) + PARK_MIN_TOKENS:
            return None
        self.parked = [p for p in self.parked if p is not best]  # by identity: a payload is megabytes
        return best
