"""The bot end to end over Socket Mode against the fake Slack, on tiny models."""

import itertools
import threading
import time

from fake_slack import BOT_ID, BOT_USER
from slack_helpers import OPTIONS, RecordingCopilot, mention

from app.copilot import Turn, collect
from app.slack import render

QUESTION = "How do I drain a node?"


def streamed(slack, channel, thread_ts):
    """The finished streamed answer messages of a thread."""
    return [m for m in slack.bot_replies(channel, thread_ts) if m.blocks and not m.streaming]


def wait_answer(slack, channel, thread_ts, what="the answer"):
    return slack.wait_for(lambda: streamed(slack, channel, thread_ts), what=what)[-1]


def test_mention_gets_status_then_streamed_answer_with_sources_in_its_thread(slack, start_bot, copilot):
    expected = collect(copilot.answer(QUESTION, options=OPTIONS))
    start_bot(copilot)
    event = mention(slack, QUESTION)
    envelope = slack.push_event(event)
    answer = wait_answer(slack, "C0OPS", event["ts"])
    assert slack.wait_acked(envelope) <= slack.calls_to("chat.stopStream")[0].at

    status = slack.calls_to("assistant.threads.setStatus")
    start = slack.calls_to("chat.startStream")[0]
    first = {"channel_id": "C0OPS", "thread_ts": event["ts"], "status": "searching the sources…"}
    assert status[0].params.items() >= first.items()
    assert status[0].at < start.at and {c.params["thread_ts"] for c in status} == {event["ts"]}
    assert start.params["thread_ts"] == event["ts"] and start.params["recipient_user_id"] == "U0ALICE"
    assert start.token == "xoxb-test-bot-token-123"

    body, footer = answer.text.split("\n\n**Sources**\n")
    assert body == render.escape(expected.answer)
    assert "1. Node runbook › Draining — `runbooks/nodes-0.md`" in footer
    assert footer.rstrip().endswith(f"{expected.finish_label}_")
    buttons = answer.blocks[0]["elements"]
    assert [b["action_id"] for b in buttons] == ["specrag_feedback_up", "specrag_feedback_down"]
    assert not [m for m in slack.bot_replies("C0OPS", event["ts"]) if m is not answer]


def test_without_streaming_a_placeholder_is_updated_at_most_once_per_interval(slack, start_bot, copilot):
    slow = SlowCopilot(copilot, delay=0.03)
    expected = collect(copilot.answer(QUESTION, options=slow.options))
    slack.fail("chat.startStream", "not_allowed")
    start_bot(slow, stream={"update_interval": 0.2}, answer=slow.options)
    event = mention(slack, QUESTION)
    slack.push_event(event)
    final = slack.wait_for(lambda: [m for m in slack.bot_replies("C0OPS", event["ts"]) if m.blocks[1:]])[0]

    sent = [at for method, at in slack.sent if method in ("chat.postMessage", "chat.update")]
    assert len(sent) >= 4  # the placeholder, at least two throttled updates, the final one
    throttled = sent[:-1]  # the last one (the footer) is not throttled
    assert all(b - a >= 0.2 - 0.02 for a, b in itertools.pairwise(throttled)), throttled
    body, footer = final.text.split("\n\n*Sources*\n")
    assert body == render.to_mrkdwn(expected.answer).strip()
    assert "1. Node runbook › Draining — `runbooks/nodes-0.md`" in footer
    assert final.blocks[-1]["elements"][0]["action_id"] == "specrag_feedback_up"


def test_a_retried_delivery_gets_no_second_answer(slack, start_bot, copilot):
    bridge = start_bot(copilot)
    event = mention(slack, QUESTION)
    first = slack.push_event(event, event_id="Ev0RETRY")
    retry = slack.push_event(event, event_id="Ev0RETRY", retry_attempt=1, store=False)
    as_dm = event | {"type": "message", "channel_type": "im", "text": QUESTION}  # same message, another event
    again = slack.push_event(as_dm, store=False)
    sentinel = mention(slack, "Where do munge keys live?")
    slack.push_event(sentinel)
    slack.wait_for(lambda: bridge.events_handled == 4, what="the listeners")
    wait_answer(slack, "C0OPS", sentinel["ts"])  # answers go in order: any second answer would be done by now
    assert all(slack.wait_acked(e) for e in (first, retry, again))
    assert [c.params["thread_ts"] for c in slack.calls_to("chat.startStream")] == [event["ts"], sentinel["ts"]]


def test_own_messages_other_bots_edits_and_joins_get_nothing(slack, start_bot, copilot):
    bridge = start_bot(copilot)
    dm = {"type": "message", "channel": "D0ALICE", "channel_type": "im", "text": QUESTION}
    ignored = [
        dm | {"user": BOT_USER, "bot_id": BOT_ID, "ts": slack.new_ts()},  # the bot's own answer
        dm | {"user": "U0OTHER", "bot_id": "B0OTHER", "subtype": "bot_message", "ts": slack.new_ts()},
        dm | {"subtype": "message_changed", "message": {"text": "edited"}, "ts": slack.new_ts()},
        dm | {"subtype": "channel_join", "user": "U0ALICE", "ts": slack.new_ts()},
        mention(slack, QUESTION, user=BOT_USER),
    ]
    envelopes = [slack.push_event(event) for event in ignored]
    question = dm | {"user": "U0ALICE", "ts": slack.new_ts(), "client_msg_id": "dm-1"}
    slack.push_event(question)
    wait_answer(slack, "D0ALICE", question["ts"])
    assert all(slack.wait_acked(e) for e in envelopes)
    # bolt drops the two from the bot itself before any listener; the other three reached ours, which ignored them
    slack.wait_for(lambda: bridge.events_handled == len(ignored) - 1, what="the listeners")
    assert [c.params["thread_ts"] for c in slack.calls_to("chat.startStream")] == [question["ts"]]
    assert not slack.calls_to("chat.postMessage")


def test_a_rate_limited_call_is_retried_after_retry_after_and_the_answer_arrives(slack, start_bot, copilot):
    slack.rate_limit("chat.startStream", retry_after=1)
    start_bot(copilot)
    event = mention(slack, QUESTION)
    slack.push_event(event)
    answer = wait_answer(slack, "C0OPS", event["ts"])
    limited, retried = slack.calls_to("chat.startStream", ok_only=False)
    assert (limited.status, retried.status) == (429, 200)
    assert retried.at - limited.at >= 1.0
    assert "**Sources**" in answer.text


def test_a_generation_failure_is_reported_and_the_next_question_is_answered(slack, start_bot, copilot, monkeypatch):
    engine, real_generate = copilot.engine, copilot.engine.generate

    def generate_then_fail(*args, **kwargs):
        monkeypatch.setattr(engine, "generate", real_generate)  # only the first answer fails
        stream = real_generate(*args, **kwargs)
        yield next(stream)
        raise RuntimeError("the model fell over")

    monkeypatch.setattr(engine, "generate", generate_then_fail)
    start_bot(copilot)
    broken, fine = mention(slack, QUESTION), mention(slack, "Where do munge keys live?")
    slack.push_event(broken)
    slack.push_event(fine)
    wait_answer(slack, "C0OPS", fine["ts"])
    replies = slack.bot_replies("C0OPS", broken["ts"])
    assert replies[-1].text.startswith(":warning: Sorry, I could not answer this")
    assert "the model fell over" not in replies[-1].text  # internals stay in the log
    assert replies[0].text.endswith("_(answer interrupted)_") and not replies[0].streaming
    assert not copilot.busy


def test_a_follow_up_in_the_thread_gets_the_earlier_messages_as_history(slack, start_bot, copilot):
    first = collect(copilot.answer(QUESTION, options=OPTIONS))
    recording = RecordingCopilot(copilot)
    start_bot(recording)
    event = mention(slack, QUESTION)
    slack.push_event(event)
    wait_answer(slack, "C0OPS", event["ts"])
    follow = mention(slack, "and how do I undo it?", thread_ts=event["ts"])
    slack.push_event(follow)
    slack.wait_for(lambda: len(streamed(slack, "C0OPS", event["ts"])) == 2, what="the follow-up's answer")
    assert recording.histories[0] == (QUESTION, [])
    assert recording.histories[1] == ("and how do I undo it?", [Turn(QUESTION, first.answer.strip())])
    replies = slack.calls_to("conversations.replies")
    assert [(c.params["channel"], c.params["ts"]) for c in replies] == [("C0OPS", event["ts"])]


def test_three_mentions_with_concurrency_one_are_answered_in_order_with_queue_notices(slack, start_bot, copilot):
    recording = RecordingCopilot(copilot, gate=threading.Event())
    start_bot(recording, concurrency=1)
    events = [mention(slack, q) for q in (QUESTION, "Where do munge keys live?", "How do I resume a node?")]
    envelopes = [slack.push_event(events[0])]
    slack.wait_for(lambda: recording.histories, what="the first answer to start")
    for place, event in enumerate(events[1:], start=1):
        envelopes.append(slack.push_event(event))
        notice = slack.wait_for(lambda e=event: slack.bot_replies("C0OPS", e["ts"]), what=f"notice #{place}")
        assert notice[0].text == render.queue_notice(place)
    assert all(slack.wait_acked(e) for e in envelopes)  # acked while the first answer is still held
    assert len(recording.histories) == 1
    recording.gate.set()
    for event in events:
        wait_answer(slack, "C0OPS", event["ts"])
    assert [q for q, _ in recording.histories] == [QUESTION, "Where do munge keys live?", "How do I resume a node?"]
    starts = [c.params["thread_ts"] for c in slack.calls_to("chat.startStream")]
    assert starts == [e["ts"] for e in events]


def test_a_feedback_click_is_stored_with_the_slack_user_and_thread(slack, start_bot, copilot):
    bridge = start_bot(copilot)
    event = mention(slack, QUESTION)
    slack.push_event(event)
    answer = wait_answer(slack, "C0OPS", event["ts"])
    button = answer.blocks[0]["elements"][1]
    slack.push_action("U0BOB", "C0OPS", answer, {"action_id": button["action_id"], "value": button["value"]})
    confirm = slack.wait_for(lambda: slack.calls_to("chat.postEphemeral"), what="the vote's confirmation")[0]
    assert confirm.params["user"] == "U0BOB" and confirm.params["thread_ts"] == event["ts"]
    (vote,) = bridge.feedback.all()
    assert (vote["rating"], vote["channel"], vote["user"]) == ("down", "slack", "U0BOB")
    assert vote["thread"] == f"C0OPS/{event['ts']}" and vote["question"] == QUESTION
    assert render.escape(vote["answer"]) in answer.text and vote["sources"][0]["path"] == "runbooks/nodes-0.md"
    slack.push_action("U0BOB", "C0OPS", answer, {"action_id": "specrag_feedback_up", "value": "C0OPS:1.0"})
    slack.wait_for(lambda: len(slack.calls_to("chat.postEphemeral")) == 2, what="the second confirmation")
    assert "no longer have that answer" in slack.calls_to("chat.postEphemeral")[1].params["text"]
    assert len(bridge.feedback.all()) == 1  # an answer from before a restart is not voted on blindly


def test_a_refused_question_is_answered_anyway_once_in_its_thread(slack, start_bot, copilot, monkeypatch):
    from app.copilot import gate

    monkeypatch.setitem(gate.THRESHOLDS, "fake-model", 0.95)  # the fake retriever's best passage is at 0.9
    bridge = start_bot(copilot)
    event = mention(slack, QUESTION)
    slack.push_event(event)
    refusal = wait_answer(slack, "C0OPS", event["ts"], what="the refusal")
    assert "do not cover this question" in refusal.text
    button = refusal.blocks[-1]["elements"][-1]
    assert (button["action_id"], button["text"]["text"]) == (render.ANYWAY_ACTION, "Answer anyway")
    click = {"action_id": button["action_id"], "value": button["value"]}
    slack.push_action("U0ALICE", "C0OPS", refusal, click)
    slack.wait_for(lambda: len(streamed(slack, "C0OPS", event["ts"])) == 2, what="the answer given anyway")
    answer = streamed(slack, "C0OPS", event["ts"])[-1]
    assert "may not cover this question" in answer.text and "do not cover this question" not in answer.text
    assert all(b["action_id"] != render.ANYWAY_ACTION for b in answer.blocks[-1]["elements"])  # an answer: no offer
    assert bridge.answers[button["value"]]["question"] == QUESTION
    update = slack.wait_for(lambda: slack.calls_to("chat.update"), what="the refusal's button taken off")[0]
    assert (update.params["channel"], update.params["ts"]) == ("C0OPS", refusal.ts)
    shown = slack.messages[("C0OPS", refusal.ts)]  # the refusal as the thread shows it now
    assert "do not cover this question" in shown.text and "do not cover this question" in shown.blocks[0]["text"]
    (actions,) = [b for b in shown.blocks if b["type"] == "actions"]
    assert [b["action_id"] for b in actions["elements"]] == [
        f"{render.FEEDBACK_ACTION}_up",
        f"{render.FEEDBACK_ACTION}_down",
    ]
    assert "<@U0ALICE> asked for an answer anyway" in shown.blocks[-1]["elements"][0]["text"]

    slack.push_action("U0ALICE", "C0OPS", refusal, click)  # the same refusal clicked again: not asked twice
    notice = slack.wait_for(lambda: slack.calls_to("chat.postEphemeral"), what="the second click's reply")[0]
    assert "already being answered" in notice.params["text"] and notice.params["user"] == "U0ALICE"
    assert len(streamed(slack, "C0OPS", event["ts"])) == 2
    slack.push_event(other := mention(slack, "Where do munge keys live?"))  # the bridge's own gate again
    assert "do not cover this question" in wait_answer(slack, "C0OPS", other["ts"]).text


def test_only_the_allowed_channels_are_answered(slack, start_bot, copilot):
    bridge = start_bot(copilot, channels=frozenset({"C0OPS"}))
    elsewhere, allowed = mention(slack, QUESTION, channel="C0RANDOM"), mention(slack, QUESTION)
    slack.push_event(elsewhere)
    slack.push_event(allowed)
    wait_answer(slack, "C0OPS", allowed["ts"])
    slack.wait_for(lambda: bridge.events_handled == 2, what="the listeners")
    assert [c.params["channel"] for c in slack.calls_to("chat.startStream")] == ["C0OPS"]


class SlowCopilot:
    """Delays every token event, so an answer lasts long enough to see the throttle."""

    def __init__(self, copilot, delay):
        self.copilot, self.delay = copilot, delay
        self.options = OPTIONS.__class__(max_new_tokens=24, speculation="none")

    def answer(self, question, history=(), options=None, passages=None):
        for event in self.copilot.answer(question, history, options, passages):
            if type(event).__name__ == "Token":
                time.sleep(self.delay)
            yield event
