"""Time to first token in a conversation, through the copilot pipeline a front end uses.

    python -m app.bench_conversation [--index DIR] [--out FILE.json] [--question Q --follow-up F --topic T
        --back B --stopped S --after-stop A --off-topic U --return R --other O]

One process first puts the system prompt and demonstration in the KV cache, as the chat and the
Slack bridge do at start (loaded from the prefix store when an earlier process saved it,
generation/prefix_store.py; with --no-warm-up the first question does this, as `specrag ask`
does), then answers, in order: a first question, a
follow-up in the same conversation (its prompt extends the previous one, so only the previous
answer and the new turn are prefilled; a follow-up searched alone keeps the first turn bare and
prefills its question again, app/copilot/conversation.py), a new topic in the same conversation
(searched alone, so the turns before it are bare and its sources are numbered from [1]), a
question that leans on that topic (its prompt extends the new topic's: the turns before it stay
bare), a question asked after one stopped at its first token (the web's Stop leaves the stopped prompt
in the cache and out of the history: it goes on from the end of the turn both share), a question the
sources do not cover (searched alone, so refused with the turns before it bare), a question back on the
topic after it (it keeps those turns bare too, as the refused one's judge prompt did), a first
question of a new conversation (the fixed prefix comes from the snapshot), and a question back in the
first conversation after it, as when two people use the chat or two Slack threads take turns (the first
conversation's cache was parked when the second began, and is put back: app/copilot/parking.py), then
three more conversations and the first once more (four taking turns, as Slack threads do). For each
it reports the prompt size, how many tokens were actually prefilled, and the time from the
call to the first answer token as the caller sees it (retrieval included).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from app.cli_options import add_copilot_args, copilot_options
from app.copilot import Copilot, Final, Token
from core.atomic import write_atomic
from core.output_paths import output_file

QUESTION = "A batch job ended with exit code 137. What does that mean and what should I do?"
FOLLOW_UP = "How do I see how much memory it used before it was killed?"
TOPIC = "Who do I contact when a storage element is almost full?"
BACK = "And how do I see which directories take the most space on it?"
STOPPED = "How do I free up space on it quickly?"
AFTER_STOP = "At what fill level does it count as critical?"
OFF_TOPIC = "How do I renew my parking permit for the campus garage?"
RETURN = "And who has to be told once it is back below that level?"
OTHER = "How do I drain a worker node before rebooting it?"
# The stopped question once more (it left no turn behind): one the runbooks answer. The earlier default,
# "And how do I check that it stays below that level afterwards?", is refused by the gate, so the row
# measured a refusal's prefill (session 46's figures were taken with this one as --resume).
RESUME = STOPPED
# three more conversations, then the first once more: four taking turns, as Slack threads do
MORE = (
    "The squid proxy returns 503 errors. What do I check first?",
    "When does a host certificate count as about to expire?",
    "How do I announce a scheduled downtime?",
)
RESUME_AGAIN = "And which directories take the most space there?"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m app.bench_conversation", description=__doc__.split("\n")[0])
    parser.add_argument("--question", default=QUESTION, help="the first question")
    parser.add_argument("--follow-up", default=FOLLOW_UP, help="asked next in the same conversation")
    parser.add_argument("--topic", default=TOPIC, help="a new topic, asked next in the same conversation")
    parser.add_argument("--back", default=BACK, help="a question that leans on the new topic, asked after it")
    parser.add_argument("--stopped", default=STOPPED, help="asked next and stopped at its first token")
    parser.add_argument("--after-stop", default=AFTER_STOP, help="asked after the stopped one, which it leaves out")
    parser.add_argument("--off-topic", default=OFF_TOPIC, help="a question the sources do not cover, asked next")
    parser.add_argument("--return", dest="back_again", default=RETURN, help="back on the topic after --off-topic")
    parser.add_argument("--other", default=OTHER, help="the first question of a second conversation")
    parser.add_argument("--resume", default=RESUME, help="back in the first conversation after --other")
    parser.add_argument(
        "--more", nargs="*", default=list(MORE), help="first questions of more conversations, asked after --resume"
    )
    parser.add_argument("--resume-again", default=RESUME_AGAIN, help="back in the first conversation after --more")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="do not prefill the system prompt before the first question (the chat and Slack do)",
    )
    add_copilot_args(parser)
    args = parser.parse_args(argv)
    if args.max_new_tokens == parser.get_default("max_new_tokens"):
        args.max_new_tokens = 64  # the first token is what is measured
    return args


def ask(copilot: Copilot, label: str, question: str, history: list, options) -> tuple[dict, Final]:
    start = time.perf_counter()
    first, final = None, None
    for event in copilot.answer(question, history, options):
        if isinstance(event, Token) and event.text and first is None:
            first = time.perf_counter() - start
        if isinstance(event, Final):
            final = event
    s = final.stats
    row = {
        "step": label,
        "question": question,
        "prompt_tokens": s.get("prompt_tokens", 0),
        "prefilled_tokens": s.get("prefilled_tokens", 0),  # a gated answer runs no model
        "retrieval_s": s.get("retrieval_s", 0.0),
        "prefill_s": s.get("prefill_s", 0.0),
        "time_to_first_token_s": round(first, 3) if first is not None else None,
        "gated": final.gated,
    }
    return row, final


def run(args: argparse.Namespace, copilot: Copilot | None = None) -> list[dict]:
    options = copilot_options(args)
    copilot = copilot or Copilot.load(options, open_index_first=True)
    rows = []
    if args.warm_up:
        warm_s = copilot.warm_up()
        rows.append(
            {
                "step": "warm-up at start (system prompt)",
                "question": "",
                "prompt_tokens": 0,
                # a prefix loaded from the prefix store (generation/prefix_store.py) counts as reused
                "prefilled_tokens": copilot.engine.target.length - copilot.engine.target.reused,
                "retrieval_s": 0.0,
                "prefill_s": round(warm_s, 3),
                "time_to_first_token_s": None,
                "gated": False,
            }
        )
    row, final = ask(copilot, "first question", args.question, [], options.answer)
    rows.append(row)
    history = [final.turn]
    for label, question in (("follow-up", args.follow_up), ("new topic", args.topic), ("back to it", args.back)):
        row, final = ask(copilot, label, question, history, options.answer)
        rows.append(row)
        history.append(final.turn)
    # the web's Stop: a question stopped at its first token stays in the cache and out of the history
    stopped = copilot.answer(args.stopped, history, options.answer)
    answered = next((event for event in stopped if isinstance(event, Token) and event.token_ids), None)
    stopped.close()
    label = "after a stopped answer" if answered else "after a refused question (--stopped was not answered)"
    row, final = ask(copilot, label, args.after_stop, history, options.answer)
    rows.append(row)
    history.append(final.turn)
    row, final = ask(copilot, "off topic", args.off_topic, history, options.answer)
    rows.append(row)
    history.append(final.turn)
    label = "back after the refused question" if final.gated else "back after the off-topic question (answered)"
    row, final = ask(copilot, label, args.back_again, history, options.answer)
    rows.append(row)
    history.append(final.turn)
    row, _ = ask(copilot, "new conversation", args.other, [], options.answer)
    rows.append(row)
    row, final = ask(copilot, "first conversation again, after the new one", args.resume, history, options.answer)
    rows.append(row)
    history.append(final.turn)
    if args.more:
        for question in args.more:
            row, _ = ask(copilot, "another new conversation", question, [], options.answer)
            rows.append(row)
        label = f"first conversation again, after {len(args.more)} others"
        row, _ = ask(copilot, label, args.resume_again, history, options.answer)
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| step | prompt tokens | prefilled | retrieval s | prefill s | time to first token s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        gated = " (gated)" if r["gated"] else ""
        lines.append(
            f"| {r['step']}{gated} | {r['prompt_tokens']} | {r['prefilled_tokens']} | {r['retrieval_s']:.2f} | "
            f"{r['prefill_s']:.2f} | {r['time_to_first_token_s'] or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.out:
        output_file(args.out)  # before the models load
    rows = run(args)
    print(table(rows))
    if args.out:
        write_atomic(args.out, json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from core.errors import run_reporting_errors

    sys.exit(run_reporting_errors("python -m app.bench_conversation", main))
