"""`specrag ask` end to end on tiny models."""

import json

import pytest

from app.ask import Passage, copied_sources
from app.cli import main
from generation.drafters import Origin

RUNBOOK = """To drain a node run scontrol update nodename=NODE state=drain reason="maintenance".

Check the reason afterwards with sinfo -R and resume with scontrol update nodename=NODE state=resume.
"""


@pytest.fixture
def context_file(tmp_path):
    path = tmp_path / "runbook.txt"
    path.write_text(RUNBOOK)
    return path


def ask_json(capsys, *argv):
    assert main(["ask", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_answer_has_every_field_and_matches_plain_decoding(tiny_engine, capsys, context_file):
    args = ["How do I drain a node?", "--context-file", str(context_file), "--max-new-tokens", "40"]
    record = ask_json(capsys, *args)
    for key in (
        "answer",
        "prompt_token_ids",
        "output_token_ids",
        "origins",
        "target_model",
        "draft_model",
        "sources",
        "finish_reason",
        "stats",
    ):
        assert key in record
    assert record["target_model"] == "/models/tiny-target" and record["speculation"] == "hybrid"
    assert len(record["origins"]) == len(record["output_token_ids"]) == record["stats"]["new_tokens"]
    assert [c["source"] for c in record["context"]] == ["runbook.txt", "runbook.txt"]
    plain = ask_json(capsys, *args, "--no-speculation")
    assert plain["speculation"] == "none" and set(plain["origins"]) == {"target"}
    assert record["output_token_ids"] == plain["output_token_ids"]
    assert record["prompt_token_ids"] == plain["prompt_token_ids"]


def test_sources_count_the_tokens_copied_from_each_chunk():
    passages = [Passage("a", "one.md"), Passage("b", "two.md"), Passage("c", "three.md")]
    origins = [
        Origin("chunk", 2, 0),
        Origin("target"),
        Origin("chunk", 2, 1),
        Origin("context", None, 5),
        Origin("model"),
        Origin("chunk", 0, 3),
    ]
    assert copied_sources(origins, passages) == [
        {"chunk": 0, "passage": 1, "source": "one.md", "copied_tokens": 1},
        {"chunk": 2, "passage": 3, "source": "three.md", "copied_tokens": 2},
    ]


def test_streamed_answer_is_followed_by_stats_on_stderr(tiny_engine, capsys, context_file):
    args = ["How do I drain a node?", "--context-file", str(context_file), "--max-new-tokens", "30"]
    record = ask_json(capsys, *args)
    assert main(["ask", *args]) == 0
    out, err = capsys.readouterr()
    assert out.rstrip("\n") == record["answer"].rstrip("\n")
    assert "tok/s" in err and "tokens/pass" in err and "acceptance" in err
    assert ("Sources:" in err) == bool(record["sources"])


def test_missing_context_file_exits_2_naming_the_file(tiny_engine, capsys, tmp_path):
    missing = tmp_path / "nope.txt"
    assert main(["ask", "q", "--context-file", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"context file {missing} does not exist" in err


def test_without_a_draft_hybrid_degrades_to_ngram(tiny_engine, capsys, context_file):
    record = ask_json(capsys, "q", "--context-file", str(context_file), "--draft", "none", "--max-new-tokens", "8")
    assert record["speculation"] == "ngram" and record["draft_model"] is None


def test_without_context_or_index_answers_without_context(tiny_engine, capsys):
    record = ask_json(capsys, "What is a forest?", "--max-new-tokens", "5")
    assert record["context"] == [] and record["stats"]["new_tokens"] == 5


def test_bad_sampling_values_are_user_errors(tiny_engine, capsys, context_file):
    assert main(["ask", "q", "--context-file", str(context_file), "--top-p", "0"]) == 2
    assert "top_p" in capsys.readouterr().err
