"""A fake Slack, a tiny-model copilot and a bot connected to both over Socket Mode."""

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # for fake_slack (tests run with --import-mode=importlib)

from copilot_fakes import FakeRetriever
from fake_slack import BOT_USER, FakeSlack

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, loading
from app.feedback import FeedbackStore
from app.slack.bot import BridgeSettings, SlackBridge, build_app
from app.slack.server import make_client, socket_mode_handler
from app.slack.streaming import StreamSettings

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


@pytest.fixture
def copilot(tiny_engine):
    return Copilot(
        loading.load_engine(ModelOptions()),
        CopilotOptions(answer=OPTIONS),
        FakeRetriever(
            [(f"runbooks/nodes-{i}.md", t) for i, t in enumerate(RUNBOOK)], title="Node runbook", heading="Draining"
        ),
    )


@pytest.fixture
def slack():
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@pytest.fixture
def start_bot(slack, tmp_path, monkeypatch):
    """start_bot(copilot, **settings) -> the bridge, connected over Socket Mode to the fake Slack."""
    started = []

    def start(copilot, **settings):
        stream = StreamSettings(**settings.pop("stream", {}))
        bridge = SlackBridge(copilot, BridgeSettings(stream=stream, **settings), FeedbackStore(tmp_path / "fb.db"))
        slack.instrument(monkeypatch)
        app = build_app(bridge, make_client(BOT_TOKEN, base_url=slack.api_url))
        handler = socket_mode_handler(app, APP_TOKEN)
        handler.connect()
        started.append((bridge, handler))
        slack.wait_connected()
        return bridge

    yield start
    for bridge, handler in started:
        # the Socket Mode client's runners take ~3 s to wind down: let them, off the test's clock
        threading.Thread(target=handler.close, daemon=True).start()
        bridge.close()


def mention(slack, text, channel="C0OPS", user="U0ALICE", thread_ts=None, **extra):
    """An app_mention event as Slack sends it, with a fresh ts."""
    event = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER}> {text}", "channel": channel}
    event["ts"] = event["event_ts"] = slack.new_ts()
    event["client_msg_id"] = f"msg-{event['ts']}"
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event | extra
