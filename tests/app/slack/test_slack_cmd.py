"""`specrag slack`: its help, its token rules, and the command run as a process against the fake Slack."""

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from slack_helpers import APP_TOKEN, BOT_TOKEN, mention

from app import cli
from app.slack import render
from app.slack.server import RedactSecrets

ROOT = Path(__file__).resolve().parents[3]


def slack_parser():
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    return subparsers.choices["slack"]


def test_help_documents_every_option_and_the_token_variables(capsys):
    with pytest.raises(SystemExit):
        cli.main(["slack", "--help"])
    text = capsys.readouterr().out
    options = [o for a in slack_parser()._actions for o in a.option_strings if o.startswith("--")]
    assert {"--mode", "--channels", "--concurrency", "--port", "--host", "--index", "--target"} <= set(options)
    assert [o for o in options if o not in text] == []
    assert all(a.help for a in slack_parser()._actions)
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "manifest.yaml"):
        assert name in text


def test_missing_tokens_are_a_clear_error(monkeypatch, capsys):
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["slack"]) == 2
    assert "set SLACK_BOT_TOKEN in the environment" in capsys.readouterr().err
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    assert cli.main(["slack", "--mode", "http"]) == 2
    assert "set SLACK_SIGNING_SECRET" in capsys.readouterr().err
    assert cli.main(["slack", "--concurrency", "0"]) == 2


def test_secrets_are_redacted_from_log_records():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "token=%s app=%s", (BOT_TOKEN, APP_TOKEN), None)
    RedactSecrets([BOT_TOKEN, APP_TOKEN, ""]).filter(record)
    assert record.getMessage() == "token=[redacted] app=[redacted]"


def test_manifest_subscribes_to_what_the_bot_answers():
    manifest = yaml.safe_load((ROOT / "app" / "slack" / "manifest.yaml").read_text())
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {"app_mention", "message.im"}
    assert manifest["settings"]["socket_mode_enabled"] and manifest["settings"]["interactivity"]["is_enabled"]
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "chat:write", "im:history", "channels:history"} <= scopes


def test_the_command_serves_over_socket_mode_reports_a_missing_index_and_never_logs_tokens(
    slack, tiny_models, tmp_path
):
    target, _, tokenizer = tiny_models
    model_dir = tmp_path / "tiny-target"
    target.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    env = os.environ | {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SPECRAG_HOME": str(tmp_path / "home"),  # no index there
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "app.cli", "slack", "--api-url", slack.api_url, "--verbose"]
    command += ["--target", str(model_dir), "--draft", "none", "--max-new-tokens", "8"]
    log = tmp_path / "slack.log"
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            slack.wait_connected(timeout=120)
            event = mention(slack, "How do I drain a node?")
            slack.push_event(event)
            reply = slack.wait_for(lambda: slack.bot_replies("C0OPS", event["ts"]), timeout=120, what="a reply")[0]
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=60) == 130
        finally:
            process.kill()
    assert reply.text.startswith(render.ERROR_PREFIX) and "specrag ingest" in reply.text
    output = log.read_text()
    assert "connected to Slack over Socket Mode" in output
    assert BOT_TOKEN not in output and APP_TOKEN not in output
