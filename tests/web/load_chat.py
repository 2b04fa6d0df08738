"""Load check: N questions at once through gradio_client against a running `specrag chat`.

    python tests/web/load_chat.py http://127.0.0.1:7860/ [-n 8]

Every question goes through the same queue as the page (one answer at a time), so the
answers come back one after the other; the check is that all N are answered and none is
lost. Prints one line per answer and the total time; exits 1 if any is missing.
"""

from __future__ import annotations

import argparse
import sys
import time

QUESTIONS = [
    "How do I rotate the glyph bank?",
    "Where do munge keys live?",
    "How do I drain a node?",
    "What do I check after a controller restart?",
]


def run_load(url: str, n: int = 8, max_new_tokens: int = 48) -> tuple[list[dict], float]:
    """Submit n questions at once; return their final records (in submission order) and the wall time."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    started = time.perf_counter()
    jobs = [
        client.submit(QUESTIONS[i % len(QUESTIONS)] + f" (#{i + 1})", 0.0, 3, "hybrid", max_new_tokens, api_name="/ask")
        for i in range(n)
    ]
    results = [job.result(timeout=600) for job in jobs]
    return results, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("-n", type=int, default=8)
    args = parser.parse_args(argv)
    results, seconds = run_load(args.url, args.n)
    answered = [r for r in results if r.get("done") and r.get("answer") and not r.get("error")]
    for r in results:
        print(f"{r['question']!r}: {len(r.get('answer', ''))} chars, {r.get('finish_reason') or r.get('error')}")
    print(f"{len(answered)}/{args.n} answered in {seconds:.1f} s")
    return 0 if len(answered) == args.n else 1


if __name__ == "__main__":
    sys.exit(main())
