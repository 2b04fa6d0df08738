"""Start `specrag chat` as a subprocess and wait until it serves (for the browser and load tests)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


@contextmanager
def running_chat(tmp: Path, *args: str) -> Iterator[str]:
    """`specrag chat ARGS` on a free port, its output in tmp/server.log; yields the page URL once it serves."""
    port, log = free_port(), tmp / "server.log"
    command = [sys.executable, "-m", "app.cli", "chat", "--port", str(port), *args]
    env = os.environ | {"SPECRAG_HOME": str(tmp / "home"), "GRADIO_ANALYTICS_ENABLED": "False"}
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_up(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
        print(f"specrag chat log: {log}")
