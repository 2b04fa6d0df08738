"""Prompt building for the copilot and the bench: messages -> token ids, chunks -> token ids.

The engine copies drafts from the chunk token ids, so a chunk is tokenized on its own
(no special tokens) exactly as it reads inside the prompt. Spec-Bench rows are read here
too, so the benchmark and the copilot build prompts in one place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.copilot.events import Passage, Turn
from core.errors import SpecragError
from generation.token_ids import common_prefix_length

SYSTEM_PROMPT = (
    "You are a copilot for shift operators. Answer only from the numbered sources, never from general knowledge.\n"
    "- Open the answer with the number of the source it comes from, as [n], and end every other sentence with "
    "its source number.\n"
    "- Copy commands, options and settings exactly as a source writes them, in backticks. Never write a command, "
    "option, name or number that no source contains.\n"
    "- Ignore sources unrelated to the question.\n"
    '- If the sources do not answer it, say "The sources do not cover this." and what they cover instead.\n'
    "- Be brief."
)
# Repeated right before the answer: a 1.5B model follows the instruction nearest to it best.
REMINDER = "Answer from these sources; open with the [n] of your source and cite [n] in every sentence."
# Closes the relevance gate's judge prompt instead of the reminder (gate.py): the model's first token, Yes or
# No, says whether it reads the answer in the sources. Of three wordings probed on the dev split of the Slurm
# questions (session 28, 93 rows), this one separated answerable from unanswerable best (AUC 0.937; 0.930
# and 0.932 for "Do the sources above contain the answer...?" and "Can this question be answered from...?").
JUDGE_QUESTION = "Is the answer to this question written in one of the sources? Yes or No."


def build_messages(
    question: str, passages: Sequence[Passage], history: Sequence[dict[str, str]] = (), closing: str = REMINDER
) -> list[dict[str, str]]:
    """The system message, earlier turns (already rendered), then the numbered passages and the question.

    The layout keeps a conversation's prompt append-only: turn t's messages are a prefix of
    turn t+1's as long as the history keeps them whole, so a follow-up prefills only the
    new turn and its new passages (the engine reuses the cached prefix). `closing`, the line after
    the question: JUDGE_QUESTION makes the relevance gate's judge prompt, which shares every token
    up to it with the answer's.
    """
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        *DEMONSTRATION,
        *history,
        {"role": "user", "content": user_content(question, passages, closing)},
    ]


def user_content(question: str, passages: Sequence[Passage], closing: str = REMINDER) -> str:
    """Each passage under its own `Source n (title › heading):` line, then the question and the reminder.

    The passages are listed best last, nearest the question, numbers unchanged (Source 5 ...
    Source 1): a small model leans on what it read last. On the 61 Slurm eval questions
    (session 20, llamacpp-f16): keyword recall 0.342 -> 0.403 (dev 0.390 -> 0.465, held-out
    0.235 -> 0.265), commands grounded 0.83 -> 0.84, refusals unchanged.
    """
    if not passages:
        return f"Question: {question}"
    blocks = [_header(p) + p.text.strip() for p in reversed(passages)]
    return "Sources:\n\n" + "\n\n".join(blocks) + f"\n\nQuestion: {question}\n{closing}"


def _header(passage: Passage) -> str:
    """`Source n (title › heading):` and a line break.

    Not `[n] title › heading`: with the answer opening with `[n]`, 10 of 38 dev answers went on
    with the title copied from that header instead of answering.
    """
    label = passage_label(passage)
    return f"Source {passage.number} ({label}):\n" if label else f"Source {passage.number}:\n"


def turn_messages(turn: Turn, with_passages: bool) -> list[dict[str, str]]:
    """An earlier exchange as chat messages, with or without the passages its question was shown with."""
    content = user_content(turn.question, turn.passages if with_passages else ())
    return [{"role": "user", "content": content}, {"role": "assistant", "content": turn.answer}]


def shown_text(passage: Passage) -> str:
    """A passage as the model reads it: its `title › heading` (if any), then the text.

    Grounding checks against this, not the bare text: a man page's name is often only in its
    title (`sdiag` in "Source 1 (sdiag › DESCRIPTION):"), and the model did read it there.
    """
    label = passage_label(passage)
    return f"{label}\n{passage.text.strip()}" if label else passage.text.strip()


def passage_label(passage: Passage) -> str:
    """'title › heading › entry' of a passage (the file name when it has no title), '' when nothing is known."""
    name = passage.source.replace("\\", "/").rsplit("/", 1)[-1]
    return " › ".join(dict.fromkeys(passage.label_parts(name)))


# Two worked exchanges on a made-up tool. First a question the sources do not answer although
# they are on its topic (declined, saying what they do cover), then one answered from two of
# three sources, an unrelated one ignored, the command copied verbatim, the answer opening with
# its source number and the later sentence ending with one. Measured on the dev split (42 q,
# 128 tokens): with every [n] at the end, 17 of 35 answers drifted into uncited prose that
# restated the question; an opening [n] made citing the answer's first decision (all answers
# cited). Opening *every* sentence with [n] was worse: the model walked the sources in order,
# summarising each, and keyword recall fell from 0.44 to 0.36 (0.41 with only the first).
# The answered exchange comes last: with the declined one last, the 1.5B model declined
# answerable questions. Its answer comes from source 1, as retrieval ranks the best passage
# first: with it from the last source, answers opened with [4] or [5] for 29 of 53 Slurm
# questions although the passage richest in the expected keywords was [1] for 20 and [4]-[6]
# for 12 (session 10; dev keyword recall 0.392 -> 0.467 on 20 questions, none lower).
# A 1.5B model imitates a demonstration far more reliably than it obeys a rule, and the
# demonstration sits in the fixed prefix, so its KV cache is computed once per process.
_RESTORE = Passage(
    1,
    "Restore a deleted file with `bkp restore --snapshot latest --path FILE --to /srv/restore`; restores never "
    "overwrite the live file.",
    "backup.md",
    "Backups",
    "Restore",
)
_SCHEDULE = Passage(
    2, "Nightly backups start at 01:00 and usually finish by 03:00.", "backup.md", "Backups", "Schedule"
)
_LOGS = Passage(2, "Backup logs are kept for 30 days.", "backup.md", "Backups", "Logs")
DEMONSTRATION = [
    {
        "role": "user",
        "content": user_content(
            "What is the phone number of the backup vendor's support line?",
            [replace(_SCHEDULE, number=1)],
        ),
    },
    {
        "role": "assistant",
        "content": "The sources do not cover this. They give the backup schedule [1], but no vendor or phone number.",
    },
    {
        "role": "user",
        "content": user_content(
            "A user deleted a file yesterday. How do I get it back?",
            [_RESTORE, replace(_SCHEDULE, number=2), replace(_LOGS, number=3)],
        ),
    },
    {
        "role": "assistant",
        "content": "[1] Restore it from the latest snapshot, which never overwrites the live file:\n\n"
        "```\nbkp restore --snapshot latest --path FILE --to /srv/restore\n```\n\n"
        "Yesterday's file is in it: backups run nightly at 01:00 [2].",
    },
]


def encode_prompt(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the chat prompt, ready for the assistant's answer."""
    if not getattr(tokenizer, "chat_template", None):
        return tokenizer(plain_prompt(messages), add_special_tokens=False)["input_ids"]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, Mapping):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    if ids and isinstance(ids[0], list):  # a batch of one
        ids = ids[0]
    return [int(i) for i in ids]


def fixed_prefix_length(tokenizer: Any, prompt_ids: Sequence[int]) -> int:
    """How many leading tokens of a one-question prompt the chat template fixes (the same for every question)."""
    return common_prefix_length(list(prompt_ids), encode_prompt(tokenizer, [{"role": "user", "content": ""}]))


def shared_prompt_ids(tokenizer: Any) -> list[int]:
    """The leading tokens every first question's prompt starts with: the system prompt and the
    demonstration. A server prefills them once at start, so no question pays for them."""
    one = encode_prompt(tokenizer, build_messages("1", []))
    other = encode_prompt(tokenizer, build_messages("1", [Passage(1, "2", "2.md")]))  # "Question:" / "Sources:"
    return one[: common_prefix_length(one, other)]


def plain_prompt(messages: list[dict[str, str]]) -> str:
    """The fallback for tokenizers without a chat template; append-only across turns like a template."""
    parts = [f"Answer: {m['content']}" if m["role"] == "assistant" else m["content"] for m in messages]
    return "\n\n".join(parts) + "\n\nAnswer:"


def encode_chunks(tokenizer: Any, chunks: Sequence[str]) -> list[list[int]]:
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in chunks]


def spec_bench_rows(path: str | Path, limit: int | None = None) -> list[dict]:
    """Spec-Bench jsonl rows as {question_id, category, turn, question, chunks, reference}.

    A RAG row's first turn is the passages, one per line, with the question on the last
    line; other rows have no passages. The bench sends `turn` verbatim as the user message.
    """
    path = Path(path)
    if limit is not None and limit < 1:
        raise SpecragError(f"--limit must be at least 1, got {limit}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise SpecragError(f"cannot read the questions file {path}: {err.strerror or err}") from err
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            raw = None
        rows.append(spec_bench_row(raw, path, number))
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise SpecragError(f"no questions in {path}")
    return rows


def spec_bench_row(raw: object, path: Path, number: int) -> dict:
    """One parsed Spec-Bench row (see spec_bench_rows); raises SpecragError naming FILE:LINE if it is not one."""
    turns = raw.get("turns") if isinstance(raw, dict) else None
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], str):
        raise SpecragError(
            f"{path}:{number} is not a Spec-Bench row: expected a JSON object with a 'turns' list of strings"
        )
    turn = turns[0]
    lines = turn.split("\n")
    is_rag = raw.get("category") == "rag" and len(lines) > 1
    chunks = [line for line in lines[:-1] if line.strip()] if is_rag else []
    question = lines[-1] if is_rag else turn
    return {
        "question_id": raw.get("question_id", number),
        "category": raw.get("category"),
        "turn": turn,
        "question": question,
        "chunks": chunks,
        "reference": raw.get("reference"),
    }
