"""A fake Slack, a tiny-model copilot and a bot connected to both over Socket Mode."""

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # for fake_slack (tests run with --import-mode=importlib)

from copilot_fakes import FakeRetriever
from fake_slack import FakeSlack
from slack_helpers import APP_TOKEN, BOT_TOKEN, OPTIONS, RUNBOOK

from app.copilot import Copilot, CopilotOptions, ModelOptions, loading
from app.feedback import FeedbackStore
from app.slack.bot import BridgeSettings, SlackBridge, build_app
from app.slack.server import make_client, socket_mode_handler
from app.slack.streaming import StreamSettings


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
