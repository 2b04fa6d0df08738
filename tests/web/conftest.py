"""`specrag chat` as a subprocess on the hand-wired tiny model and a fixture index, for browser and load tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tiny_chat import save_chat_model, write_fixture_docs

ROOT = Path(__file__).parents[2]
EVENT_DELAY = 0.1  # seconds after each streamed event: a slow model, so streaming and stop are observable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_fixture_index(tmp: Path) -> Path:
    """The fixture docs indexed with the packaged MiniLM (the embedder the server loads too)."""
    from retrieval.ingest import ingest

    index = tmp / "index"
    report = ingest([write_fixture_docs(tmp / "docs")], index)
    assert report.chunks >= 3
    return index


def wait_until_up(url: str, process: subprocess.Popen, log: Path, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"specrag chat exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"specrag chat did not come up in {timeout:.0f} s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def chat_server(tmp_path_factory):
    """A running `specrag chat`: yields (url, feedback_db, tmp dir); stopped at the end of the session."""
    tmp = tmp_path_factory.mktemp("chat")
    model = save_chat_model(tmp / "tiny-chat-model")
    index = build_fixture_index(tmp)
    port, feedback = free_port(), tmp / "feedback.db"
    command = [
        sys.executable, "-m", "app.cli", "chat", "--index", str(index), "--target", str(model),
        "--draft", str(model), "--port", str(port), "--max-new-tokens", "96", "--passages", "3",
        "--feedback-db", str(feedback), "--event-delay", str(EVENT_DELAY),
    ]  # fmt: skip
    log = tmp / "server.log"
    env = os.environ | {"SPECRAG_HOME": str(tmp / "home"), "GRADIO_ANALYTICS_ENABLED": "False"}
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_up(url, process, log)
        yield url, feedback, tmp
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        print(f"specrag chat log: {log}")
