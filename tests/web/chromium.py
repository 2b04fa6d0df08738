"""Debian's Chromium as the browser tests and the chat comparison launch it (never a downloaded browser)."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# headless, and without the background connections this machine's closed network refuses
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
