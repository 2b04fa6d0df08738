"""`specrag ask` end to end on tiny models."""

import json

import pytest

from app.cli import main

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
    assert [p["source"] for p in record["passages"]] == ["runbook.txt", "runbook.txt"]
    assert [p["number"] for p in record["passages"]] == [1, 2]
    plain = ask_json(capsys, *args, "--no-speculation")
    assert plain["speculation"] == "none" and set(plain["origins"]) == {"target"}
    assert record["output_token_ids"] == plain["output_token_ids"]
    assert record["prompt_token_ids"] == plain["prompt_token_ids"]


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


def test_without_context_or_index_the_user_is_told_to_ingest(tiny_engine, capsys):
    assert main(["ask", "What is a forest?", "--max-new-tokens", "5"]) == 2
    assert "specrag ingest" in capsys.readouterr().err


def test_bad_sampling_values_are_user_errors(tiny_engine, capsys, context_file):
    assert main(["ask", "q", "--context-file", str(context_file), "--top-p", "0"]) == 2
    assert "top_p" in capsys.readouterr().err


def test_an_empty_question_is_refused_before_the_models_load(capsys, monkeypatch, context_file):
    from app.copilot import Copilot

    def no_loading(*args, **kwargs):
        raise AssertionError("the models were loaded for an empty question")

    monkeypatch.setattr(Copilot, "load", no_loading)
    assert main(["ask", "  ", "--context-file", str(context_file)]) == 2
    assert "the question is empty" in capsys.readouterr().err
