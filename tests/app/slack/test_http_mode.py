"""HTTP Events API mode: signed requests are answered, bad or stale signatures get 401 and nothing else."""

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.request

import pytest
from fake_slack import BOT_USER, TEAM
from slack_helpers import BOT_TOKEN, mention

from app.feedback import FeedbackStore
from app.slack.bot import BridgeSettings, SlackBridge, build_app
from app.slack.server import EVENTS_PATH, http_server, make_client, serve_in_background

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def events_url(slack, copilot, tmp_path):
    bridge = SlackBridge(copilot, BridgeSettings(), FeedbackStore(tmp_path / "fb.db"))
    app = build_app(bridge, make_client(BOT_TOKEN, base_url=slack.api_url), http=True, signing_secret=SECRET)
    server = http_server(app, "127.0.0.1", 0)
    serve_in_background(server)
    yield f"http://127.0.0.1:{server.server_address[1]}{EVENTS_PATH}"
    server.shutdown()
    server.server_close()
    bridge.close()


def signed(body: str, secret: str = SECRET, timestamp: int | None = None) -> dict:
    timestamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}"}


def post(url: str, body: str, headers: dict) -> tuple[int, str]:
    request = urllib.request.Request(url, body.encode(), headers | {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def callback(event: dict) -> str:
    body = {"type": "event_callback", "team_id": TEAM, "event": event, "event_id": f"Ev{event['ts']}"}
    return json.dumps(body | {"authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}]})


def test_bad_or_stale_signatures_are_rejected(slack, events_url):
    body = callback(mention(slack, "How do I drain a node?"))
    assert post(events_url, body, signed(body, secret="not-the-secret"))[0] == 401
    assert post(events_url, body, signed(body, timestamp=int(time.time()) - 600))[0] == 401  # replayed
    assert post(events_url, body, {})[0] == 401
    assert post(events_url, body + " ", signed(body))[0] == 401  # body changed after signing
    assert [c.method for c in slack.calls] == ["auth.test"]  # nothing was answered


def test_a_signed_mention_is_acknowledged_at_once_and_answered_in_its_thread(slack, events_url):
    challenge = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "t"})
    assert post(events_url, challenge, signed(challenge)) == (200, '{"challenge": "abc123"}')
    event = mention(slack, "How do I drain a node?")
    body = callback(event)
    status, _ = post(events_url, body, signed(body))
    assert status == 200
    stop = slack.wait_for(lambda: slack.calls_to("chat.stopStream"), what="the streamed answer")[0]
    start = slack.calls_to("chat.startStream")[0]
    assert start.params["thread_ts"] == event["ts"] and stop.params["ts"] == start.params.get("ts", stop.params["ts"])
