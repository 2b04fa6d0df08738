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
    # the passages are listed as soon as they are found, before the answer's statistics
    assert err.index("specrag:   [1] runbook.txt\nspecrag:   [2] runbook.txt\n") < err.index("tok/s")


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


class Loaded(Exception):
    """Raised by a stub Copilot.load with the options it was given."""


@pytest.mark.parametrize(
    ("argv", "context"),
    [
        ([], 4096),  # 6 passages, 256 new tokens: 600 + 6 x 512 + 256 = 3,928
        (["--passages", "12", "--max-new-tokens", "1024"], 8192),
        (["--passages", "1", "--max-new-tokens", "64"], 2048),
    ],
)
def test_a_one_question_ask_loads_a_context_sized_for_its_passages(monkeypatch, argv, context, context_file):
    from contextlib import nullcontext
    from types import SimpleNamespace

    from app import ask
    from app.copilot import Copilot

    def capture(options, **kwargs):
        raise Loaded(options)

    monkeypatch.setattr(Copilot, "load", capture)
    found = SimpleNamespace(result=lambda: ([], None))  # no index here: a search that found nothing
    monkeypatch.setattr(ask, "SearchProcess", lambda *args: nullcontext(found))
    with pytest.raises(Loaded) as loaded:
        main(["ask", "How do I drain a node?", *argv])
    assert loaded.value.args[0].models.context == context
    with pytest.raises(Loaded) as given:  # passages from files have no known size: the full context
        main(["ask", "How do I drain a node?", "--context-file", str(context_file), *argv])
    assert given.value.args[0].models.context is None


def test_the_llamacpp_loader_never_exceeds_its_conversation_context(monkeypatch, tmp_path):
    from generation import models

    sizes = []

    class Runner:
        def __init__(self, gguf, n_ctx, **kw):
            sizes.append(n_ctx)

        def tokenizer(self):
            return object()

    monkeypatch.setattr(models, "_gguf_or_error", lambda name: tmp_path / "t.gguf")
    monkeypatch.setattr(models, "LlamaCppLM", Runner)
    for context in (None, 4096, 100_000):
        models.load_llamacpp_models("t", None, row_invariant=False, context=context)
    assert sizes == [models.LLAMACPP_CONTEXT, 4096, models.LLAMACPP_CONTEXT]


def test_ask_fits_the_llama_context_to_its_prompt_once_the_passages_are_known(
    tiny_engine, capsys, context_file, monkeypatch
):
    from app.copilot import pipeline

    asked: list[int] = []
    real_fit = pipeline.Copilot.fit_context

    def fit(self, question, passages, options=None):  # records the prompt the runner would be sized to
        asked.append(len(self._prepare(question, [], list(passages), self.options.answer, False).prompt_ids))
        return real_fit(self, question, passages, options)

    monkeypatch.setattr(pipeline.Copilot, "fit_context", fit)
    record = ask_json(capsys, "How do I drain a node?", "--context-file", str(context_file))
    assert asked == [len(record["prompt_token_ids"])]  # sized from the very prompt the answer was given


def test_fit_context_rounds_prompt_and_answer_up_to_whole_kv_steps(tiny_engine):
    from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, loading
    from app.copilot.events import Passage

    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(max_new_tokens=100)))
    assert not copilot.fit_context("How?", [Passage(1, "Drain it.", "a.md")])  # a torch model: nothing to shrink
    sizes: list[int] = []
    copilot.engine.target.shrink_context = lambda n: sizes.append(n) or True  # as LlamaCppLM's
    prompt = copilot._prepare("How?", [], [Passage(1, "Drain it.", "a.md")], copilot.options.answer, False)
    assert copilot.fit_context("How?", [Passage(1, "Drain it.", "a.md")])
    assert sizes == [-(-(len(prompt.prompt_ids) + 100) // 256) * 256]


def test_the_sources_list_names_the_section_and_the_entry_a_passage_goes_on_with():
    from app.ask import source_line

    source = {"number": 2, "title": "squeue", "path": "/docs/squeue.html", "heading": "OPTIONS", "score": 0.048,
              "entry": "-O, --Format=<output_format>", "cited": True, "copied_tokens": 0}  # fmt: skip
    assert source_line(source, "squeue.html") == (
        "[2] squeue › OPTIONS › -O, --Format=<output_format> (squeue.html, score 0.048) - cited"
    )  # the entry was left out here while the web and Slack lists showed it
    bare = source | {"title": "", "heading": "", "entry": "", "score": None, "cited": False}
    assert source_line(bare, "squeue.html") == "[2] /docs/squeue.html (squeue.html)"


def test_a_source_the_drafter_copied_one_token_from_says_so_in_the_singular_in_every_sources_list():
    from app.ask import source_line
    from app.web.render import source_row

    source = {"number": 1, "title": "FTS", "path": "/rb/fts.md", "heading": "", "score": 0.047, "entry": "",
              "cited": False, "copied_tokens": 1}  # fmt: skip
    assert source_line(source, "fts.md").endswith("- 1 token copied")  # the chat read "1 tokens copied"
    assert "1 token copied" in source_row(source, "fts.md") and "1 tokens" not in source_row(source, "fts.md")
    assert source_line(source | {"copied_tokens": 3, "cited": True}, "fts.md").endswith("- cited, 3 tokens copied")
