"""Prompt building and Spec-Bench rows."""

import json
import re

import pytest

from app.copilot import Passage
from app.copilot.prompting import (
    DEMONSTRATION,
    REMINDER,
    SYSTEM_PROMPT,
    build_messages,
    encode_chunks,
    encode_prompt,
    spec_bench_rows,
)
from generation.errors import SpecragError

CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_messages_number_the_passages_before_the_question():
    passages = [
        Passage(1, "scontrol update state=drain", "/srv/docs/slurm.md"),
        Passage(2, "sinfo -R", "/srv/docs/sinfo.md", "sinfo", "Reasons"),
    ]
    messages = build_messages("How do I drain a node?", passages)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1:5] == DEMONSTRATION
    assert messages[0]["content"] == SYSTEM_PROMPT
    for word in ("only from the numbered sources", "exactly", "do not cover", "[n]", "unrelated"):
        assert word in SYSTEM_PROMPT
    user = messages[-1]["content"]
    assert "Source 1 (slurm.md):\nscontrol update state=drain" in user and "/srv/docs" not in user
    # best passage last, nearest the question, numbered as retrieval ranked it
    assert user.index("Source 2 (sinfo › Reasons):\nsinfo -R") < user.index("Source 1 (slurm.md)")
    assert user.index("Source 1 (slurm.md)") < user.index("Question: How do I drain a node?")
    assert "[1]" not in user  # the answer's opening [n] must not be followed, in the prompt, by a title to copy
    assert user.endswith("Question: How do I drain a node?\n" + REMINDER)


def test_a_passage_that_goes_on_with_an_entry_is_shown_under_its_term():
    passage = Passage(1, "Reboot the nodes when they become idle.", "/d/scontrol.html", "scontrol", "COMMANDS")
    entry = Passage(1, passage.text, passage.source, "scontrol", "COMMANDS", entry="reboot [ASAP] {ALL|<NodeList>}")
    assert "Source 1 (scontrol › COMMANDS):\nReboot" in build_messages("q", [passage])[-1]["content"]
    user = build_messages("q", [entry])[-1]["content"]
    assert "Source 1 (scontrol › COMMANDS › reboot [ASAP] {ALL|<NodeList>}):\nReboot" in user


def test_demonstration_declines_first_then_answers_opening_with_its_source_and_a_verbatim_command():
    declined, answered = DEMONSTRATION[1]["content"], DEMONSTRATION[3]["content"]
    assert declined.startswith("The sources do not cover this.") and "[1]" in declined
    before, command, after = answered.split("```")
    command = command.strip()
    prose = [line for line in (before + after).split("\n") if line.strip()]
    assert command in DEMONSTRATION[2]["content"]  # copied verbatim from its source
    assert re.match(r"\[1\] \S", prose[0])  # the answer opens with its source number: the first, as ranked
    assert all(re.search(r"\[\d\]\S*$", line) for line in prose[1:])  # later sentences end with theirs
    assert "[3]" not in answered and "Source 3 (" in DEMONSTRATION[2]["content"]  # the unrelated source is ignored


def test_tokenizer_without_chat_template_gets_a_plain_prompt(tiny_models):
    tokenizer = tiny_models[2]
    ids = encode_prompt(tokenizer, build_messages("why?", [Passage(1, "because", "")]))
    text = tokenizer.decode(ids)
    assert (
        text.startswith(SYSTEM_PROMPT)
        and "Source 1:\nbecause" in text
        and text.endswith("Question: why?\n" + REMINDER + "\n\nAnswer:")
    )


def test_chat_template_output_is_a_flat_id_list(tiny_models):
    tokenizer = tiny_models[2].__class__(tokenizer_object=tiny_models[2].backend_tokenizer, eos_token="<eos>")
    tokenizer.chat_template = CHAT_TEMPLATE
    ids = encode_prompt(tokenizer, [{"role": "user", "content": "hi"}])
    assert all(isinstance(i, int) for i in ids)
    assert tokenizer.decode(ids) == "<user>hi\n<assistant>"


def test_chunks_are_encoded_without_special_tokens(tiny_models):
    tokenizer = tiny_models[2]
    assert encode_chunks(tokenizer, ["ab", "c"]) == [
        tokenizer.convert_tokens_to_ids(list("ab")),
        tokenizer.convert_tokens_to_ids(["c"]),
    ]


def write_rows(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_rag_rows_split_into_passages_and_question(tmp_path):
    path = write_rows(
        tmp_path / "q.jsonl",
        [
            {
                "question_id": 1,
                "category": "rag",
                "turns": ["first passage\nsecond passage\nwhat?"],
                "reference": [["x"]],
            },
            {"question_id": 2, "category": "qa", "turns": ["who played anna?"]},
            {"question_id": 3, "category": "qa", "turns": ["not read"]},
        ],
    )
    rag, qa = spec_bench_rows(path, limit=2)
    assert rag["chunks"] == ["first passage", "second passage"] and rag["question"] == "what?"
    assert rag["turn"] == "first passage\nsecond passage\nwhat?" and rag["reference"] == [["x"]]
    assert qa["chunks"] == [] and qa["question"] == qa["turn"] == "who played anna?"


def test_bad_rows_and_missing_files_are_clear_errors(tmp_path):
    with pytest.raises(SpecragError, match="cannot read the questions file"):
        spec_bench_rows(tmp_path / "missing.jsonl")
    path = tmp_path / "bad.jsonl"
    path.write_text('{"turns": ["ok"]}\nnot json\n')
    with pytest.raises(SpecragError, match=r"bad\.jsonl:2 is not a Spec-Bench row"):
        spec_bench_rows(path)
