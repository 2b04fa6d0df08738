"""What the Slack tests share besides fixtures: tokens, the runbook, answer options, a recording
copilot and a mention event. A module of its own name: `from conftest import` found whichever
test folder's conftest came first on sys.path, and failed when other folders' tests ran first."""

import threading
from dataclasses import dataclass, field

from fake_slack import BOT_USER

from app.copilot import AnswerOptions, Copilot

RUNBOOK = [
    "To drain a node run scontrol update nodename=NODE state=drain reason=maintenance and wait.",
    "Check the reason afterwards with sinfo -R and resume with scontrol update nodename=NODE state=resume.",
    "Munge keys live in /etc/munge/munge.key and must be identical on every node.",
]
BOT_TOKEN, APP_TOKEN = "xoxb-test-bot-token-123", "xapp-test-app-token-456"
OPTIONS = AnswerOptions(max_new_tokens=24)


@dataclass
class RecordingCopilot:
    """The real copilot, recording each call's history; `gate` (if set) holds answers until it opens."""

    copilot: Copilot
    histories: list = field(default_factory=list)
    gate: threading.Event | None = None

    def answer(self, question, history=(), options=None, passages=None):
        self.histories.append((question, list(history)))
        if self.gate is not None:
            self.gate.wait(30)
        return self.copilot.answer(question, history, options, passages)


def mention(slack, text, channel="C0OPS", user="U0ALICE", thread_ts=None, **extra):
    """An app_mention event as Slack sends it, with a fresh ts."""
    event = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER}> {text}", "channel": channel}
    event["ts"] = event["event_ts"] = slack.new_ts()
    event["client_msg_id"] = f"msg-{event['ts']}"
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event | extra
