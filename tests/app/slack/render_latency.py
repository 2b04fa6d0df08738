"""Does a slow Slack hold decoding up? Seconds to render one answer against the seconds of decoding it.

    python tests/app/slack/render_latency.py [--tokens 120] [--token-s 0.04] [--call-s 0.15]

A made-up pipeline decodes `--tokens` tokens at `--token-s` seconds each (after a 0.5 s prefill) and
a fake Slack client takes `--call-s` seconds for every call (setStatus, appendStream, stopStream).
`render_answer` is timed over it; with the pipeline in its own thread the render takes about the
decoding alone plus the last calls, not the decoding plus every call.
"""

from __future__ import annotations

import argparse
import time

from app.copilot import Final, Status, Token
from app.slack import render
from app.slack.streaming import SlackThread, StreamSettings, render_answer

PREFILL_S = 0.5


class _Final(Final):
    shown = answer = "x"

    def __init__(self) -> None:  # only what the renderer reads
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=120)
    parser.add_argument("--token-s", type=float, default=0.04)
    parser.add_argument("--call-s", type=float, default=0.15)
    args = parser.parse_args()

    class Stream:
        ts = "1.1"

        def append(self, markdown_text: str) -> None:
            time.sleep(args.call_s)

        def stop(self, **_: object) -> None:
            time.sleep(args.call_s)

    class Client:
        def chat_stream(self, **_: object) -> Stream:
            return Stream()

        def assistant_threads_setStatus(self, **_: object) -> None:
            time.sleep(args.call_s)

    def pipeline():
        yield Status("searching", "searching the sources…")
        time.sleep(PREFILL_S)
        for i in range(args.tokens):
            time.sleep(args.token_s)
            yield Token(f"word{i} ", [], [], {})
        yield _Final()

    render.footer = lambda final, markdown=False: "sources"  # no real answer behind the made-up one
    render.feedback_blocks = lambda key: []
    started = time.perf_counter()
    render_answer(pipeline(), SlackThread(Client(), "C0", "1.0"), StreamSettings(), "C0:1.0")
    seconds, decoding = time.perf_counter() - started, PREFILL_S + args.tokens * args.token_s
    print(f"render {seconds:.2f} s, decoding alone {decoding:.2f} s: {seconds / decoding:.2f}x")


if __name__ == "__main__":
    main()
