"""Question rows for `specrag eval`: read, validate, skip the malformed ones with a message.

One JSON object per line, in one of two shapes (detected per row):
- ours: `id`, `question`, optional `reference_answer` (str) or `reference_answers` (list),
  `answer_keywords` (list: phrases a correct answer must contain), `gold_sources` (list of
  file names or paths; `[]` marks a question the corpus cannot answer; `gold` is read as an
  alias, as in corpora/slurm/questions.jsonl), `unanswerable` (bool; true is the same as
  `gold_sources: []`), `kind` (str). `answer_hint` (str) is kept for display only. Other fields
  are ignored, and `ignored_fields` names them, so that a misspelt one is not silently unscored.
- Spec-Bench (`turns` present): read by `app.copilot.prompting.spec_bench_row`; its passages
  are the chunks of the first turn (no retrieval), its `reference` alternatives are the
  reference answers and `category` is the kind.

A row that is not JSON, lacks `id` or `question`, repeats an id, or gives a known field the
wrong type is skipped and reported as "FILE:LINE: why"; it is never fatal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.copilot.prompting import spec_bench_row
from core.errors import SpecragError

_LISTS = ("reference_answers", "answer_keywords", "gold_sources", "gold")
_STRINGS = ("reference_answer", "kind", "answer_hint")
_KNOWN = {"id", "question", "unanswerable", *_LISTS, *_STRINGS}


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    references: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    gold_sources: tuple[str, ...] | None = None  # None: unknown (no retrieval metrics); (): unanswerable
    kind: str = ""
    chunks: tuple[str, ...] | None = None  # given passages (Spec-Bench): no retrieval
    hint: str = ""
    line: int = 0

    @property
    def unanswerable(self) -> bool:
        return self.gold_sources == ()


class RowError(ValueError):
    """Why a row is skipped."""


def read_questions(path: str | Path, limit: int | None = None) -> tuple[list[Question], list[str]]:
    """The valid questions of `path` (the first `limit` of them) and one message per skipped row."""
    path = Path(path)
    if limit is not None and limit < 1:
        raise SpecragError(f"--limit must be at least 1, got {limit}")
    lines = read_lines(path)
    questions: list[Question] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            question = parse_row(line, path, number)
            if question.id in seen:
                raise RowError(f"duplicate id {question.id!r}")
        except RowError as err:
            skipped.append(f"{path}:{number}: skipped: {err}")
            continue
        seen.add(question.id)
        questions.append(question)
        if limit is not None and len(questions) >= limit:
            break
    return questions, skipped


def ignored_fields(path: str | Path) -> str | None:
    """A note naming the fields of `path`'s rows that the eval does not read (with their row counts), or
    None. Spec-Bench rows are left out: they have their own shape."""
    counts: dict[str, int] = {}
    for line in read_lines(path):
        try:
            raw = json_object(line) if line.strip() else {}
        except RowError:
            continue  # reported as a skipped row
        if "turns" not in raw:
            for name in raw.keys() - _KNOWN:
                counts[name] = counts.get(name, 0) + 1
    if not counts:
        return None
    named = ", ".join(f"{name!r} ({n} row{'s' if n > 1 else ''})" for name, n in sorted(counts.items()))
    return f"{path}: ignored fields {named}; the eval reads {', '.join(sorted(_KNOWN))}"


def read_lines(path: str | Path) -> list[str]:
    """The lines of a questions file; one that cannot be read is a SpecragError naming it."""
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise SpecragError(f"cannot read the questions file {path}: {getattr(err, 'strerror', None) or err}") from err


def json_object(line: str) -> dict:
    """One JSONL row as a dict, or a RowError that says what is wrong with it."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as err:
        raise RowError(f"not valid JSON ({err.msg} at column {err.colno})") from err
    if not isinstance(raw, dict):
        raise RowError(f"expected a JSON object, got {type(raw).__name__}")
    return raw


def parse_row(line: str, path: Path, number: int) -> Question:
    raw = json_object(line)
    if "turns" in raw:
        return _spec_bench(raw, path, number)
    return _ours(raw, number)


def _ours(raw: dict, number: int) -> Question:
    for name in _STRINGS:
        if name in raw and not isinstance(raw[name], str):
            raise RowError(f"field {name!r} must be a string, got {type(raw[name]).__name__}")
    for name in _LISTS:
        value = raw.get(name)
        if name in raw and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise RowError(f"field {name!r} must be a list of strings")
    if "unanswerable" in raw and not isinstance(raw["unanswerable"], bool):
        raise RowError(f"field 'unanswerable' must be true or false, got {json.dumps(raw['unanswerable'])}")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise RowError("missing or empty 'question'")
    references = [raw["reference_answer"]] if raw.get("reference_answer") else []
    references += raw.get("reference_answers", [])
    gold = raw.get("gold_sources", raw.get("gold"))
    if raw.get("unanswerable"):
        if gold:
            raise RowError("'unanswerable' is true but 'gold_sources' names sources that answer it")
        gold = []
    return Question(
        id=_row_id(raw),
        question=question.strip(),
        references=tuple(r for r in references if r.strip()),
        keywords=tuple(k for k in raw.get("answer_keywords", []) if k.strip()),
        gold_sources=None if gold is None else tuple(gold),
        kind=raw.get("kind", ""),
        hint=raw.get("answer_hint", ""),
        line=number,
    )


def _spec_bench(raw: dict, path: Path, number: int) -> Question:
    try:
        row = spec_bench_row(raw, path, number)
    except SpecragError as err:
        raise RowError(str(err).removeprefix(f"{path}:{number} ")) from err
    reference = row["reference"]
    if isinstance(reference, list) and reference and isinstance(reference[0], list):
        reference = reference[0]  # one list of acceptable answers per turn; we ask the first turn
    if isinstance(reference, str):
        reference = [reference]
    if reference is not None and not (isinstance(reference, list) and all(isinstance(r, str) for r in reference)):
        raise RowError("field 'reference' must be a string or a list of strings")
    return Question(
        id=str(row["question_id"]),
        question=row["question"].strip(),
        references=tuple(reference or ()),
        kind=row["category"] or "",
        chunks=tuple(row["chunks"]) if row["chunks"] else None,
        line=number,
    )


def _row_id(raw: dict) -> str:
    value = raw.get("id")
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
        raise RowError("missing 'id' (a string or an integer)")
    return str(value)
