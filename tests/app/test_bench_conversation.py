"""The conversation TTFT benchmark: what a follow-up and a new conversation actually prefill."""

import json

from copilot_fakes import FakeRetriever

from app import bench_conversation
from app.copilot import Copilot, CopilotOptions, loading
from app.copilot.options import ModelOptions

DOCS = [
    ("exit-codes.md", "Exit code 137 means the job was killed with SIGKILL, usually by the memory limit."),
    ("memory.md", "Run sacct -j JOBID --format=MaxRSS to see the peak memory of a finished job."),
    ("drain.md", "Drain a node with scontrol update nodename=NODE state=drain reason=reboot."),
]


def fresh_copilot():
    """A copilot on a new engine (the tiny fixture builds one per load): nothing cached yet."""
    return Copilot(loading.load_engine(ModelOptions()), CopilotOptions(), FakeRetriever(DOCS))


def test_a_follow_up_and_a_new_conversation_prefill_only_what_is_new(tiny_engine, tmp_path):
    argv = ["--out", str(tmp_path / "ttft.json"), "--max-new-tokens", "12", "--no-warm-up"]
    rows = bench_conversation.run(bench_conversation.parse_args(argv), fresh_copilot())
    first, follow_up, topic, back, after_stop, off_topic, back_again, other, resumed, *more, again = rows
    assert (
        len(more) == len(bench_conversation.MORE)
        and again["step"] == f"first conversation again, after {len(more)} others"
    )
    assert again["prompt_tokens"] > resumed["prompt_tokens"]
    assert first["prefilled_tokens"] == first["prompt_tokens"] - 1  # nothing cached yet
    assert follow_up["prompt_tokens"] > first["prompt_tokens"]  # the conversation so far is in it
    # only what follows the first prompt (its answer, the new passages and question) is computed
    assert follow_up["prefilled_tokens"] <= follow_up["prompt_tokens"] - first["prompt_tokens"] + 1
    # a new topic is searched alone and keeps the turns before it bare; the question that leans on it then
    # extends its prompt (before session 41 it put the first turn's passages back and prefilled everything)
    assert topic["prefilled_tokens"] > topic["prompt_tokens"] - follow_up["prompt_tokens"]
    assert back["prefilled_tokens"] <= back["prompt_tokens"] - topic["prompt_tokens"] + 1
    # after Stop the next question goes on from the end of the turn it shares with the stopped prompt
    assert after_stop["prefilled_tokens"] <= after_stop["prompt_tokens"] - back["prompt_tokens"] + 1
    # no gate on this fake index: the off-topic question is answered, searched alone, and the next one
    # (it leans on the conversation) extends its prompt
    assert off_topic["step"] == "off topic" and back_again["step"].startswith("back after the off-topic")
    assert back_again["prefilled_tokens"] <= back_again["prompt_tokens"] - off_topic["prompt_tokens"] + 1
    # a new conversation reuses the fixed system prompt and demonstration
    assert 0 < other["prefilled_tokens"] < other["prompt_tokens"] - 100
    # back in the first conversation after it: its cache was parked meanwhile (parking.py; the torch runner
    # copies its cache out since session 62), so only what follows its last prompt is computed
    assert resumed["prompt_tokens"] > back_again["prompt_tokens"]
    assert resumed["prefilled_tokens"] <= resumed["prompt_tokens"] - back_again["prompt_tokens"] + 1
    assert all(r["time_to_first_token_s"] > 0 for r in rows)
    assert "| follow-up |" in bench_conversation.table(rows)


def test_after_the_warm_up_the_first_question_prefills_only_its_own_tokens(tiny_engine, tmp_path):
    args = bench_conversation.parse_args(["--max-new-tokens", "12"])
    warm, first, *_ = bench_conversation.run(args, fresh_copilot())
    assert warm["step"].startswith("warm-up") and warm["prefilled_tokens"] > 100
    assert first["prefilled_tokens"] == first["prompt_tokens"] - 1 - warm["prefilled_tokens"]


def test_main_writes_the_table_and_json(tiny_engine, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(
        bench_conversation.Copilot,
        "load",
        lambda options, **_: Copilot(loading.load_engine(options.models), options, FakeRetriever(DOCS)),
    )
    assert bench_conversation.main(["--out", str(tmp_path / "t.json"), "--max-new-tokens", "8"]) == 0
    assert [r["step"] for r in json.loads((tmp_path / "t.json").read_text())["rows"]] == [
        "warm-up at start (system prompt)",
        "first question",
        "follow-up",
        "new topic",
        "back to it",
        "after a stopped answer",
        "off topic",
        "back after the off-topic question (answered)",
        "new conversation",
        "first conversation again, after the new one",
        *["another new conversation"] * 3,
        "first conversation again, after 3 others",
    ]
    assert "time to first token" in capsys.readouterr().out
