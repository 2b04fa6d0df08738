"""Decode only code the sources hold: a token filter that keeps commands, options and code grounded.

The grounding check (grounding.py) flags a command after the fact; an operator at 3 a.m. is
better served by never seeing an invented one. While the model writes an inline `code` span,
a line of a fenced block or a prose `--option`, `CopiedCode` lets it take only tokens after
which that item can still be found in the passages by the check's own rule
(`GroundingSources.may_complete`), and close it only where the check finds it whole
(`GroundingSources.holds_whole`): verbatim without cutting a word, or built from one passage
plus the user's own values (a number, a `<placeholder>`, a name from the question).

Among the likeliest tokens (the `candidates` first, within `max_gap` logits of the top one) the
best allowed one wins; under sampling all allowed ones keep their probabilities. A special token
(an empty piece) is never steered to. When no likely token is allowed the row is left as it is:
the model writes what it would have written, and the grounding check flags it.

One exception: a word of the sources that the model has begun and finds no likely way to finish.
Asked which command shows fair-share values (session 48), it wrote `` `ss ``, was steered from `hr`
to `ha` (the only likely token going on with a word of the sources, `sshare`), and then nothing
likely went on with `ssha`: it wrote `ssha -l`. When the unfinished word begins exactly one word of
the sources and is no word itself, the likeliest token within FINISH_CANDIDATES that goes on with
that word is taken (`re`, 199th at a gap of 6.7), and the answer reads `sshare -l`, as the source
does. Where none is that likely the row is left alone, as before. Prose is never touched.

The filter is a pure function of the answer so far, so speculative decoding stays exactly plain
decoding of the filtered model (generation/token_filter.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.copilot.code_spans import FENCE_LINE, OPTION, line_spans
from app.copilot.grounding import GroundingSources, drop_prompt, normalise
from generation import arrays
from generation.arrays import Logits

CANDIDATES = 40  # the likeliest tokens searched for an allowed one (a copy is nearly always among them)
# Steer only to a token at least a tenth as likely as the model's choice (logits within ln 10). Further
# down the model has no grounded way on in mind, and a forced one was garbage: `ArrayTaskTh` + `rottle`
# (gap 21.7) became a special token, then prose inside the code block (dev slurm-003). A good steer,
# `sbatch --after...` -> `sbatch --depend=afterok:...`, had a gap of 1.8.
MAX_GAP = math.log(10.0)
_TRIGGERS = "`-\n"  # a token without these cannot start or change a code item in prose
# How far down the row a token that finishes a begun source word is looked for (see the module's note):
# the model has committed to the word, so a token far below its choice is taken (`re`: 199th, 6.7 down).
FINISH_CANDIDATES = 256
# The word being written at the end of a code item: a name, option, key or value, cut anywhere
_BEGUN_WORD = re.compile(r"(?:--?)?[A-Za-z0-9_][\w.\-]*$")


class CopiedCode:
    def __init__(
        self,
        tokenizer: Any,
        passages: Sequence[str],
        question: str = "",
        commands: Mapping[str, frozenset[str]] | None = None,
        candidates: int = CANDIDATES,
        max_gap: float = MAX_GAP,
    ) -> None:
        self.sources = GroundingSources(passages, question, commands)
        self.tokenizer, self.candidates, self.max_gap = tokenizer, candidates, max_gap
        self._pieces: dict[int, str] = {}
        self.steered = 0  # rows where the likeliest token was not allowed and another was taken
        self.left_alone = 0  # rows where no likely token was allowed (what follows is flagged, not steered)
        self.finished = 0  # rows where no likely token was allowed and a begun source word was finished

    def restrict(self, answer_ids: Sequence[int], logits: Logits, greedy: bool) -> Logits:
        text = self.tokenizer.decode(list(answer_ids), skip_special_tokens=True)
        free = not in_code_item(text)
        order = arrays.top_indices(logits, self.candidates)
        top = order[0]
        if greedy and self._allows(text, top, free, top):
            return logits
        floor = float(logits[top]) - self.max_gap
        plausible = [token for token in order if float(logits[token]) >= floor]
        allowed = []
        for token in plausible:
            if self._allows(text, token, free, top):
                allowed.append(token)
                if greedy:
                    break
        if not allowed:
            finishing = None if free else self._finishing(text, logits, top)
            if finishing is not None:
                self.finished += 1
                return arrays.only(logits, [finishing])
            self.left_alone += 1
            return logits  # no plausible token stays grounded: the model writes its own, the check flags it
        if len(allowed) == len(plausible):
            return logits  # nothing plausible was forbidden
        self.steered += 1
        return arrays.only(logits, allowed)

    def _allows(self, text: str, token: int, free: bool, top: int) -> bool:
        piece = self._piece(token)
        if not piece:  # a special token: the model's own choice (an end), never one to steer to
            return token == top
        if free and not any(c in piece for c in _TRIGGERS):
            return True
        return not self.violated(text + piece, len(text))

    def _finishing(self, text: str, logits: Logits, top: int) -> int | None:
        """The likeliest token that goes on with the one word of the sources that the code item's last,
        unfinished word begins (None if it begins none, or several, or is a word of its own)."""
        begun = _BEGUN_WORD.search(text)
        if begun is None or len(begun.group(0)) < 2:
            return None
        stem = begun.group(0)
        if any(stem in vocabulary for vocabulary in self.sources.vocabularies):
            return None  # a whole word already: what fails is not this word
        words = self.sources.completions(stem)
        if len(words) != 1:
            return None
        rest = words.pop()[len(stem) :]
        for token in arrays.top_indices(logits, FINISH_CANDIDATES):
            piece = self._piece(token)
            if piece and rest.startswith(piece) and self._allows(text, token, False, top):
                return token
        return None

    def _piece(self, token: int) -> str:
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.tokenizer.decode([token], skip_special_tokens=True)
        return piece

    def violated(self, text: str, start: int) -> bool:
        """Does a code item that text[start:] writes or closes fail to be (or stay) grounded?

        Only items reaching past `start` are judged, so an earlier flagged one does not block the rest.
        """
        line_start = text.rfind("\n", 0, start) + 1
        in_fence = len(FENCE_LINE.findall(text, 0, line_start)) % 2 == 1
        lines = text[line_start:].split("\n")
        offset = line_start
        for j, line in enumerate(lines):
            is_open = j == len(lines) - 1
            stripped = line.strip()
            if stripped.startswith("```"):
                in_fence = not in_fence
            elif is_open and stripped and "```".startswith(stripped):
                pass  # a fence mark still being written
            elif in_fence:
                if self._fails(drop_prompt(line), "code", is_open):
                    return True
            elif self._prose_fails(line, offset, start, is_open):
                return True
            offset += len(line) + 1
        return False

    def _prose_fails(self, line: str, offset: int, start: int, line_open: bool) -> bool:
        """Inline spans and --options of one prose line that reach past `start`."""
        pos = 0
        for span in [*line_spans(line, line_open), None]:
            prose_end = span.opening if span else len(line)
            for match in OPTION.finditer(line, pos, prose_end):
                option_open = line_open and span is None and match.end() == len(line)
                if (option_open or offset + match.end() >= start) and self._fails(
                    match.group(0).rstrip("."), "option", option_open
                ):
                    return True
            if span is None:
                return False
            code = line[span.start : span.end]
            if span.closed and offset + span.closing > start and self._fails(drop_prompt(code), "code", False):
                return True
            if not span.closed and self._fails(code, "code", True):
                return True
            pos = span.closing
        return False

    def _fails(self, item: str, kind: str, still_open: bool) -> bool:
        if still_open:
            return not self.sources.may_complete(item)
        item = normalise(item)
        return bool(item) and not self.sources.holds_whole(kind, item)


def in_code_item(text: str) -> bool:
    """Is the end of `text` inside a code item: a fenced block, an open inline span, or a word that may be an option?"""
    line_start = text.rfind("\n") + 1
    line = text[line_start:]
    if len(FENCE_LINE.findall(text, 0, line_start)) % 2 or any(not s.closed for s in line_spans(line, True)):
        return True
    word = line.rsplit(None, 1)[-1] if line and not line[-1].isspace() else ""
    return word.startswith("-")
