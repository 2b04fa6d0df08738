"""A long answer continues in further messages, natively streamed or as updated placeholders."""

import dataclasses
import re

import pytest
from slack_helpers import BOT_TOKEN, OPTIONS

from app.copilot import GroundingItem, Status, Token, collect
from app.slack import render
from app.slack.server import make_client
from app.slack.streaming import SlackThread, StreamSettings, render_answer

WORDS = [f"Step {i}: drain node{i} with `scontrol` & wait for <idle>.\n\n" for i in range(8)]


def squash(text: str) -> str:
    return "".join(text.split())


@pytest.fixture
def long_answer(copilot):
    final = collect(copilot.answer("How do I drain a node?", options=OPTIONS))
    final = dataclasses.replace(final, answer="".join(WORDS))
    return [Status("searching", "searching the sources…"), *[Token(w, [], [], {}) for w in WORDS], final]


@pytest.mark.parametrize("native", [True, False])
def test_a_long_answer_continues_in_further_messages(slack, long_answer, native):
    thread = SlackThread(make_client(BOT_TOKEN, base_url=slack.api_url), "C0OPS", "1.0", "U0ALICE", "T0OPS")
    settings = StreamSettings(native=native, stream_interval=0, update_interval=0, message_limit=120)
    final = render_answer(iter(long_answer), thread, settings, "C0OPS:1.0")
    messages = slack.bot_replies("C0OPS", "1.0")
    assert len(messages) >= 3 and not any(m.streaming for m in messages) and all(m.text for m in messages)
    heading = "**Sources**" if native else "*Sources*"
    body, footer = re.split(rf"\n+{re.escape(heading)}\n", "\n".join(m.text for m in messages))
    expected = render.escape(final.answer) if native else render.to_mrkdwn(final.answer)
    assert squash(body) == squash(expected) and "`runbooks/nodes-0.md`" in footer
    assert all(len(m.text) <= 120 for m in messages[:-1])
    assert [bool(m.blocks) and m.blocks[-1]["type"] == "actions" for m in messages][-1]
    if native:
        assert not any(m.blocks for m in messages[:-1])  # the buttons go on the last message only
        assert len(slack.calls_to("chat.startStream")) == len(messages)


def test_footer_numbers_the_sources_warns_about_ungrounded_commands_and_ends_with_stats(long_answer):
    final = dataclasses.replace(
        long_answer[-1],
        grounding=[
            GroundingItem("scontrol drain <node>", "command", False),
            GroundingItem("sinfo -R", "command", True),
            GroundingItem("--afterok=1", "option", False, "--depend=afterok:1", 2),
            GroundingItem("srun --gpus-per-node=volta:2", "code", True, adapted=True),
        ],
        citations=dataclasses.replace(long_answer[-1].citations, invalid=[7]),
    )
    lines = render.footer(final).split("\n")
    assert lines[0] == "*Sources*"
    assert lines[1:4] == [f"{n + 1}. Node runbook › Draining — `runbooks/nodes-{n}.md`" for n in range(3)]
    assert lines[4] == ":warning: command `scontrol drain &lt;node&gt;` is not found in the sources"
    pointer = "nearest in [2]: `--depend=afterok:1`"
    assert lines[5] == f":warning: option `--afterok=1` is not found in the sources; {pointer}"
    assert lines[6] == "`srun --gpus-per-node=volta:2` is a source's code with your own values; check them"
    assert lines[7] == ":warning: the answer cites passages that do not exist: [7]"
    assert lines[8].startswith("_") and "tok/s" in lines[8] and len(lines) == 9


def test_a_stream_closed_midway_is_finished_by_updating_the_same_message(slack, long_answer):
    slack.fail("chat.appendStream", "message_not_in_streaming_state")
    thread = SlackThread(make_client(BOT_TOKEN, base_url=slack.api_url), "C0OPS", "1.0", "U0ALICE", "T0OPS")
    settings = StreamSettings(stream_interval=0, update_interval=0)
    final = render_answer(iter(long_answer), thread, settings, "C0OPS:1.0")
    (message,) = slack.bot_replies("C0OPS", "1.0")
    assert [c.params["ts"] for c in slack.calls_to("chat.update")][-1] == message.ts
    assert message.text.startswith(render.to_mrkdwn(final.answer).strip() + "\n\n*Sources*\n")
    assert message.blocks[-1]["elements"][0]["value"] == "C0OPS:1.0"


@pytest.mark.parametrize("native", [True, False])
def test_a_withheld_answer_overwrites_every_message_its_words_were_streamed_into(slack, long_answer, native):
    notice = "The sources do not cover this: the drafted answer named a phone number that no source contains."
    invented = GroundingItem("555-1234", "phone", False)
    final = dataclasses.replace(long_answer[-1], withheld=notice, grounding=[invented])
    thread = SlackThread(make_client(BOT_TOKEN, base_url=slack.api_url), "C0OPS", "1.0", "U0ALICE", "T0OPS")
    settings = StreamSettings(native=native, stream_interval=0, update_interval=0, message_limit=120)
    render_answer(iter([*long_answer[:-1], final]), thread, settings, "C0OPS:1.0")
    messages = [m.text for m in slack.bot_replies("C0OPS", "1.0")]
    pieces = render.split_message(f"{render.to_mrkdwn(notice)}\n\n{render.footer(final)}", 120)
    assert len(messages) > len(pieces)  # the words had filled more messages than the notice needs
    assert messages == pieces + [render.WITHHELD_REST] * (len(messages) - len(pieces))
    assert not any("drain node" in m or "555-1234" in m for m in messages)


@pytest.mark.parametrize("native", [True, False])
def test_a_looping_answer_is_replaced_by_its_collapsed_text_in_every_message(slack, long_answer, native):
    loop = "[1] Drain the node with scontrol before the maintenance window.\n\n" * 12
    final = dataclasses.replace(long_answer[-1], answer=loop, finish_reason="repeat")
    thread = SlackThread(make_client(BOT_TOKEN, base_url=slack.api_url), "C0OPS", "1.0", "U0ALICE", "T0OPS")
    settings = StreamSettings(native=native, stream_interval=0, update_interval=0, message_limit=120)
    streamed = [Token(line + "\n\n", [], [], {}) for line in loop.split("\n\n") if line]
    render_answer(iter([long_answer[0], *streamed, final]), thread, settings, "C0OPS:1.0")
    messages = [m.text for m in slack.bot_replies("C0OPS", "1.0")]
    pieces = render.split_message(f"{render.to_mrkdwn(final.shown)}\n\n{render.footer(final)}", 120)
    assert final.shown == "[1] Drain the node with scontrol before the maintenance window."
    assert len(messages) > len(pieces)  # the loop had filled more messages than the shown answer needs
    assert messages == pieces + [render.REPEATS_REST] * (len(messages) - len(pieces))
    assert sum(m.count("Drain the node") for m in messages) == 1


class _HeldStream:
    """A native stream whose first append waits (up to 5 s) for the pipeline to reach its end."""

    ts = "1.1"

    def __init__(self, pipeline_done):
        self.pipeline_done, self.waited, self.texts = pipeline_done, None, []

    def append(self, markdown_text):
        if self.waited is None:
            self.waited = self.pipeline_done.wait(5)
        self.texts.append(markdown_text)

    def stop(self, **_):
        pass


class _SlowClient:
    def __init__(self, stream):
        self.stream = stream

    def chat_stream(self, **_):
        return self.stream

    def assistant_threads_setStatus(self, **_):
        pass


def test_decoding_goes_on_while_a_slack_call_is_on_its_way(long_answer):
    import threading

    done = threading.Event()

    def pipeline():
        yield from long_answer[:-1]
        done.set()  # every token decoded: only possible if the first append did not hold the pipeline up
        yield long_answer[-1]

    stream = _HeldStream(done)
    settings = StreamSettings(native=True, stream_interval=0)
    final = render_answer(pipeline(), SlackThread(_SlowClient(stream), "C0OPS", "1.0"), settings, "C0OPS:1.0")
    assert stream.waited is True and final is long_answer[-1]
    assert squash("".join(stream.texts)).startswith(squash(render.escape("".join(WORDS))))
