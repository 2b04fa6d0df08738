"""Formatting, thread history, the queue and the throttle, without Slack."""

import threading

import pytest

from app.copilot import GroundingItem, Turn
from app.copilot.gate import REFUSAL, refusal_text
from app.copilot.withhold import withheld_notice
from app.slack import render
from app.slack.history import BotIdentity, clean_question, strip_footer, thread_turns
from app.slack.queue import AnswerQueue, Deduper
from app.slack.streaming import Throttle

BOT = BotIdentity("UBOT", "BBOT")


def test_markdown_becomes_mrkdwn_and_control_characters_are_escaped():
    markdown = "# Drain\n**Run** this *now* & see [docs](https://x.org/a?b=1&c=2):\n- `a < b && c > d`\n~~old~~"
    assert render.to_mrkdwn(markdown) == (
        "*Drain*\n*Run* this _now_ &amp; see <https://x.org/a?b=1&amp;c=2|docs>:\n"
        "• `a &lt; b &amp;&amp; c &gt; d`\n~old~"
    )


def test_a_link_to_the_sources_own_chapter_is_text_in_slack():
    markdown = "See [troubleshooting](15-troubleshooting.md#troubleshooting), [docs](https://x.org) and `[a](b.md)`"
    assert render.to_mrkdwn(markdown) == "See troubleshooting, <https://x.org|docs> and `[a](b.md)`"


def test_double_backtick_code_becomes_slacks_single_backtick_code():
    assert render.to_mrkdwn("Set ``multipart_chunksize`` to ``16MB`` **now**, or `` a`b ``") == (
        "Set `multipart_chunksize` to `16MB` *now*, or `` a`b ``"
    )


def test_code_blocks_are_kept_verbatim_but_escaped_and_lose_their_language():
    markdown = "Run:\n```bash\nscontrol update **x** <node> & wait\n```\n> quoted **bold**"
    assert (
        render.to_mrkdwn(markdown) == "Run:\n```\nscontrol update **x** &lt;node&gt; &amp; wait\n```\n> quoted *bold*"
    )


def test_a_long_text_is_split_at_paragraphs_and_code_blocks_are_closed_and_reopened():
    text = "intro paragraph\n\n```\n" + "\n".join(f"line {i}" for i in range(40)) + "\n```\n\nend"
    pieces = render.split_message(text, limit=120)
    assert len(pieces) > 2 and all(len(p) <= 120 for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces)
    rejoined = "\n".join(p.replace("\n```", "").replace("```\n", "") for p in pieces)
    assert [line for line in rejoined.split("\n") if line.startswith("line")] == [f"line {i}" for i in range(40)]
    assert render.split_message("short") == ["short"] and render.split_message("x" * 10, 4) == ["x" * 4] * 2 + ["xx"]


def test_a_question_is_cleaned_of_the_bots_mention_and_slack_markup():
    text = "<@UBOT> why does <#C123|ops> say &lt;drain&gt; &amp; <https://wiki/x|this page> to <@U0ALICE>?"
    assert clean_question(text, BOT) == "why does #ops say <drain> & this page to @U0ALICE?"


def test_the_thread_becomes_turns_without_footers_notices_errors_or_other_bots():
    def msg(ts, text, **who):
        return {"ts": f"{ts}.0", "text": text, **({"user": "U0ALICE"} | who)}

    footer = "\n\n**Sources**\n1. Runbook — `a.md`\n_12 tokens · …_"
    messages = [
        msg(1, "<@UBOT> how do I drain?"),
        msg(2, render.queue_notice(1), user="UBOT", bot_id="BBOT"),
        msg(3, "Use scontrol &amp; wait." + footer, user="UBOT", bot_id="BBOT"),
        msg(4, "deploy finished", user="U0CI", bot_id="B0CI", subtype="bot_message"),
        msg(5, "<@UBOT> and munge?"),
        msg(6, render.error_text("the index is missing"), user="UBOT", bot_id="BBOT"),
        msg(7, "<@UBOT> and resume?"),
        msg(8, "part one", user="UBOT"),
        msg(9, "part two\n\n*Sources*\n1. x", user="UBOT"),
        msg(10, "<@UBOT> who is on call tonight?"),
        msg(11, render.to_mrkdwn(refusal_text([])) + footer, user="UBOT"),
        msg(12, "<@UBOT> and their pager?"),
        msg(13, render.to_mrkdwn(withheld_notice([GroundingItem("555-1234", "phone", False)])) + footer, user="UBOT"),
        msg(14, render.WITHHELD_REST, user="UBOT"),
        msg(15, "<@UBOT> and the munge key?"),
        msg(16, "[1] All nodes share one munge.key." + footer, user="UBOT"),
        msg(17, render.REPEATS_REST, user="UBOT"),  # a collapsed loop's leftover message
        msg(18, "<@UBOT> the question being answered"),
        msg(19, "a later answer", user="UBOT"),
    ]
    turns = thread_turns(messages, BOT, before_ts="18.0")
    assert turns[:2] == [Turn("how do I drain?", "Use scontrol & wait."), Turn("and resume?", "part one\npart two")]
    # the gate's refusal is known as such, so a follow-up after it is searched with "and resume?"
    assert turns[2] == Turn("who is on call tonight?", REFUSAL, refused=True)
    # so is a withheld answer's notice, without the filler of the messages it overwrote
    notice = withheld_notice([GroundingItem("555-1234", "phone", False)])
    assert turns[3] == Turn("and their pager?", notice, refused=True)
    assert turns[4] == Turn("and the munge key?", "[1] All nodes share one munge.key.") and len(turns) == 5
    assert strip_footer("no footer here") == "no footer here"


def test_deduper_remembers_any_key_of_a_delivery():
    seen = Deduper(capacity=3)
    assert seen.first_time(("event", "Ev1"), ("message", "C1", "1.0"), None)
    assert not seen.first_time(("event", "Ev2"), ("message", "C1", "1.0"))  # same message, other event
    assert not seen.first_time(("event", "Ev1"))
    for i in range(5):
        seen.first_time(("event", f"other{i}"))
    assert seen.first_time(("event", "Ev1"))  # forgotten past its capacity


def test_queue_runs_jobs_in_order_reports_places_and_survives_a_failing_job():
    gate, done = threading.Event(), []

    def run(job):
        gate.wait(10)
        if job == "boom":
            raise RuntimeError("boom")
        done.append(job)

    queue = AnswerQueue(1, run)
    places = [queue.submit(job) for job in ("a", "boom", "b", "c")]
    assert places == [0, 1, 2, 3]
    gate.set()
    queue.close(timeout=10)
    assert done == ["a", "b", "c"] and queue.pending == 0
    with pytest.raises(RuntimeError, match="closed"):
        queue.submit("late")


def test_queue_with_two_workers_tells_only_the_third_job_to_wait():
    gate = threading.Event()
    queue = AnswerQueue(2, lambda job: gate.wait(10))
    assert [queue.submit(i) for i in range(4)] == [0, 0, 1, 2]
    gate.set()
    queue.close(timeout=10)


def test_throttle_lets_one_call_through_per_interval():
    now = [0.0]
    throttle = Throttle(1.0, clock=lambda: now[0])
    ticks = []
    for step in range(30):
        now[0] = step * 0.25
        ticks.append(throttle.ready())
    assert [i * 0.25 for i, ok in enumerate(ticks) if ok] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_feedback_buttons_and_queue_notice():
    (actions,) = render.feedback_blocks("C1:1.0")
    assert [(b["action_id"], b["value"]) for b in actions["elements"]] == [
        ("specrag_feedback_up", "C1:1.0"),
        ("specrag_feedback_down", "C1:1.0"),
    ]
    assert "#2 in the queue" in render.queue_notice(2) and render.queue_notice(1).startswith(render.NOTICE_PREFIX)


def test_a_clicked_answer_anyway_button_goes_and_the_refusal_keeps_its_words_and_thumbs():
    posted = render.message_blocks("The sources do not cover this question.", "C1:2.0", refused=True)
    taken = render.anyway_taken(posted, "The sources do not cover this question.", "asked anyway")
    assert taken[0] == posted[0] and taken[-1] == {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": "asked anyway"}],
    }
    assert [e["action_id"] for e in taken[1]["elements"]] == ["specrag_feedback_up", "specrag_feedback_down"]
    streamed = render.feedback_blocks("C1:2.0", refused=True)  # a streamed refusal: its words are the message's text
    taken = render.anyway_taken(streamed, "**The sources** do not cover this.", "asked anyway")
    assert taken[0] == {"type": "markdown", "text": "**The sources** do not cover this."}
    assert all(e["action_id"] != render.ANYWAY_ACTION for e in taken[1]["elements"])


def test_the_footers_notes_escape_what_they_quote_from_the_sources_once():
    from app.copilot.events import Passage
    from app.copilot.pipeline import final_from_text

    entry = "- -j, --jobs\n- Format is <job(.step)>. Stat this job step or a list of steps."
    sstat = Passage(1, entry, "s.html", "sstat")
    final = final_from_text("Which steps run?", [sstat], "[1] Run `sstat -j <job_id>` & wait.", "eos")
    footer = render.footer(final)
    assert "`-j`, as [1] (sstat) defines it: “Format is &lt;job(.step)&gt;. Stat this job step" in footer
    assert "<job" not in footer and "&amp;lt;" not in footer  # Slack's control characters escaped, and only once


def test_the_footers_sources_name_the_entry_a_passage_goes_on_with():
    from app.copilot.events import Passage
    from app.copilot.pipeline import final_from_text

    passage = Passage(1, "Reboot them when idle.", "s.html", "scontrol", "COMMANDS", entry="reboot {ALL|<NodeList>}")
    footer = render.footer(final_from_text("How do I reboot?", [passage], "[1] Reboot them when idle.", "eos"))
    assert "1. scontrol › COMMANDS › reboot {ALL|&lt;NodeList&gt;} — `s.html`" in footer


def test_the_footer_warns_of_a_spliced_sentence_and_names_a_neighbours_description():
    from app.copilot.events import Passage
    from app.copilot.pipeline import final_from_text

    def footer(question: str, text: str, answer: str) -> str:
        return render.footer(final_from_text(question, [Passage(1, text, "doc.md", "sinfo")], answer, "eos"))

    thresholds = (
        "- **One node failing the probe**: P3. Drain the node.\n"
        "- **More than 5 % of worker nodes failing**: a site-wide problem, usually the squids. P2, page on-call."
    )
    spliced = footer(
        "And one node?", thresholds, "[1] One node failing the probe makes it a site-wide problem, usually the squids."
    )
    assert "“One node failing the probe” and “a site-wide problem, usually the squids.” come from two" in spliced
    states = (
        "- DRAINING\n- The node is currently executing a job, but will not be allocated additional jobs.\n\n"
        "- FAILING\n- The node & its job are expected to fail soon, and the node is unavailable for use."
    )
    answer = "[1] The node & its job are expected to fail soon, and the node is unavailable for use."
    neighbour = footer("What does DRAIN mean?", states, answer)
    assert "is how [1] (sinfo) describes `FAILING`, which neither the question nor the answer names" in neighbour
    assert "&amp;" in neighbour and "&amp;amp;" not in neighbour  # the quote's & escaped once


def test_a_code_span_cut_by_a_soft_wrap_stays_one_span_in_slack():
    text = "Check `cvmfs_talk -i atlas.cern.ch\nhost info` to see which one.\n\nThen `a` and\n`b`."
    shown = "Check `cvmfs_talk -i atlas.cern.ch host info` to see which one.\n\nThen `a` and\n`b`."
    assert render.to_mrkdwn(text) == shown


def test_bold_around_a_code_span_is_bold_in_slack():
    line = "**Probe fails with `failed to download` or timeouts.** Check `a**b**` and <x>."
    shown = "*Probe fails with `failed to download` or timeouts.* Check `a**b**` and &lt;x&gt;."
    assert render.to_mrkdwn(line) == shown
