"""Does the web chat add latency? The same question through `specrag chat` and `specrag ask`.

    python tests/web/compare_with_ask.py "QUESTION" [--port 7899] [--browser] [model/index flags for both]

Starts `specrag chat` with the given flags, waits until its models are loaded, asks the question
through the /ask API (gradio_client, streaming) and stops the server; then runs `specrag ask
--json` with the same flags. Both are the first question of a fresh process (same prefix
prefill). Prints time to first token and decode tok/s: the chat's as the pipeline measured it
and as the client saw it (first streamed text), and ask's as the pipeline measured it.

With `--browser` the question is asked in the page itself, in Chromium on this machine (Playwright and
Debian's `chromium`), and the chat's figures are the ones its stats line shows, with the CPU seconds
Chromium spent while the answer streamed: a browser on the server's machine takes cores from the model.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chromium import ARGS, CHROMIUM

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def chat_server(port: int, flags: list[str]) -> Iterator[Any]:
    """`specrag chat FLAGS` on `port`, with the user's own home (models, calibration); yields a connected client."""
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "chat", "--port", str(port), *flags], cwd=ROOT)
    try:
        yield _connect(f"http://127.0.0.1:{port}/", server)
    finally:
        server.terminate()
        server.wait(timeout=60)


def chat_figures(question: str, port: int, flags: list[str]) -> dict:
    with chat_server(port, flags) as client:
        job = _ask_when_loaded(client, question)
        started, first_text, record = time.perf_counter(), None, {}
        for record in job:
            if first_text is None and record.get("answer"):
                first_text = time.perf_counter() - started
        record = job.outputs()[-1]
        stats = record["stats"]
        return {
            "client_ttft_s": round(first_text or 0.0, 2),
            "pipeline_ttft_s": stats["time_to_first_token_s"],
            "decode_tokens_per_s": stats["decode_tokens_per_s"],
            "new_tokens": stats["new_tokens"],
            "answer": record["answer"],
        }


def browser_figures(question: str, port: int, flags: list[str]) -> dict:
    import psutil
    from playwright.sync_api import sync_playwright

    def chromium_cpu_s() -> float:
        total = 0.0
        for proc in psutil.process_iter(["name"]):
            if "chrom" in (proc.info["name"] or ""):
                try:
                    times = proc.cpu_times()
                    total += times.user + times.system
                except psutil.Error:
                    pass
        return total

    with chat_server(port, flags), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector(".sr-ready", timeout=900_000)
        before = chromium_cpu_s()
        page.fill("#sr-question textarea", question)
        page.click("#sr-ask")
        page.wait_for_selector("#sr-chat .sr-details", timeout=900_000)
        spent = chromium_cpu_s() - before
        shown = page.locator('#sr-chat [data-testid="bot"]').last.inner_text()
        browser.close()
    stats = re.search(r"(\d+) tokens · ([\d.]+) tok/s · first token ([\d.]+) s", shown)
    if stats is None:
        raise SystemExit(f"no stats line in the chat's answer:\n{shown}")
    return {
        "client_ttft_s": float(stats[3]),
        "pipeline_ttft_s": float(stats[3]),
        "decode_tokens_per_s": float(stats[2]),
        "new_tokens": int(stats[1]),
        "chromium_cpu_s": round(spent, 1),
        "shown": shown,  # the page's rendering, not the answer's markdown: not compared with ask's
    }


def _connect(url: str, server: subprocess.Popen):
    from gradio_client import Client

    for _ in range(600):
        if server.poll() is not None:
            raise SystemExit("specrag chat exited")
        try:
            return Client(url, verbose=False)
        except Exception:
            time.sleep(1)
    raise SystemExit("specrag chat did not come up")


def _ask_when_loaded(client, question: str):
    """Submit once the models are loaded: an empty question waits for them, then is refused at once."""
    client.submit("", api_name="/ask").result()
    return client.submit(question, 0.0, 6, "hybrid", 256, api_name="/ask")


def ask_figures(question: str, flags: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "ask", question, "--json", *flags], cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    record = json.loads(out.stdout)
    stats = record["stats"]
    return {
        "pipeline_ttft_s": stats["time_to_first_token_s"],
        "decode_tokens_per_s": stats["decode_tokens_per_s"],
        "new_tokens": stats["new_tokens"],
        "answer": record["answer"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question")
    parser.add_argument("--port", type=int, default=7899)
    parser.add_argument("--browser", action="store_true", help="ask in the page, in Chromium on this machine")
    args, flags = parser.parse_known_args()
    chat = (browser_figures if args.browser else chat_figures)(args.question, args.port, flags)
    ask = ask_figures(args.question, flags)
    print(json.dumps({"chat": chat, "ask": ask}, indent=1))
    print(
        f"chat: first token {chat['client_ttft_s']:.1f} s (client) / {chat['pipeline_ttft_s']:.1f} s (pipeline), "
        f"{chat['decode_tokens_per_s']:.2f} tok/s{_chromium(chat)}; ask: first token {ask['pipeline_ttft_s']:.1f} s, "
        f"{ask['decode_tokens_per_s']:.2f} tok/s; same answer: {_same(chat, ask)}"
    )
    return 0


def _same(chat: dict, ask: dict) -> str:
    return str(chat["answer"].strip() == ask["answer"].strip()) if "answer" in chat else "not compared (page text)"


def _chromium(chat: dict) -> str:
    return f" (Chromium used {chat['chromium_cpu_s']} CPU s)" if "chromium_cpu_s" in chat else ""


if __name__ == "__main__":
    raise SystemExit(main())
