"""Values the answer itself tells the operator to fill in: "Replace `job_id` with the ID of the simulation job."

A source's `sbatch --depend=afterok:123 my.job` written as `sbatch --depend=afterok:job_id my.job`, followed by
"Replace `job_id` with ...", names a slot as plainly as `<job_id>` does: the operator is told to put their own
value there, and nothing in it is a claim about the software. The grounding check reads such a word as the
placeholder it was declared to be (`<job_id>`), so the command is found as a source's command with the user's
own value, and a lone `job_id` span is no item, as a lone `<job_id>` is not.

Only identifier-like words are taken (`job_id`, `JOBID`, `node.name`): an option (`--mem`) or a path the answer
says to replace is a claim and stays one.

A path under `/path/to/` is the documentation's own way of writing such a slot (`/path/to/cleanup_script.sh`):
alone it is no item either, as no operator reads it as a file the software has.
"""

from __future__ import annotations

import re

_WORD = r"[A-Za-z_][\w.]*"
# "Replace `X` with ...", "substitute `X` by ...", "where `X` is/are/stands for ..."
_DECLARED = re.compile(
    rf"\b(?:[Rr]eplac(?:e|ing)|[Ss]ubstitut(?:e|ing))\s+`({_WORD})`\s+(?:with|by)\b"
    rf"|\b[Ww]here\s+`({_WORD})`\s+(?:is|are|stands\s+for)\b"
)


def declared_placeholders(answer: str) -> frozenset[str]:
    """The identifier-like words `answer` declares as values for the operator to fill in."""
    return frozenset(word for match in _DECLARED.finditer(answer) for word in match.groups() if word)


_STAND_IN_PATH = re.compile(r"/path/to(?:/[^\s/]+)*/?")


def is_stand_in_path(text: str) -> bool:
    """Is `text` a path of the `/path/to/...` kind, a slot for the operator's own file?"""
    return bool(_STAND_IN_PATH.fullmatch(text.strip()))


def as_placeholders(text: str, declared: frozenset[str]) -> str:
    """`text` with each whole occurrence of a declared word written as a placeholder (`job_id` -> `<job_id>`)."""
    if not declared:
        return text
    words = "|".join(re.escape(word) for word in sorted(declared, key=len, reverse=True))
    return re.sub(rf"(?<![\w.<-])(?:{words})(?![\w>-])", lambda m: f"<{m.group(0)}>", text)
