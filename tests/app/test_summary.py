"""The stats line and the checks under an answer: worded once, shown alike by ask, Slack and the web chat."""

import dataclasses

from app import ask
from app.copilot import Citations, Final, GroundingItem, Turn
from app.copilot.summary import check_notes, shown_paths, stats_parts
from app.slack import render as slack_render
from app.web import render as web_render

STATS = {
    "new_tokens": 40, "decode_tokens_per_s": 12.34, "tokens_per_pass": 2.5, "copied_share": 0.4,
    "acceptance_rate": 0.75, "drafted": {"ngram": 8, "model": 0}, "time_to_first_token_s": 1.234,
    "speculation": "hybrid",
}  # fmt: skip
FINAL = Final(
    question="How do I drain a node?", answer="Run `scontrol drain <node>` [1].", finish_reason="eos",
    passages=[], sources=[], citations=Citations([1], [], {}, []), stats=STATS, prompt_ids=[], output_ids=[],
    origins=[], turn=Turn("How do I drain a node?", ""), relevance={"similarity": 0.4, "threshold": 0.5,
    "calibrated": True, "covered": True},
    grounding=[
        GroundingItem("scontrol drain <node>", "command", False, "scontrol update State=DRAIN", 1),
        GroundingItem("--gpus-per-node=2", "option", True, adapted=True),
    ],
)  # fmt: skip


def test_stats_parts_name_speed_passes_copies_acceptance_first_token_and_how_it_ended():
    assert stats_parts(FINAL) == [
        "40 tokens", "12.3 tok/s", "2.50 tokens/pass", "copied 40%", "acceptance 75%", "first token 1.2 s",
        "speculation hybrid", "eos",
    ]  # fmt: skip
    plain = dataclasses.replace(FINAL, stats=STATS | {"speculation": "none", "drafted": {}, "copied_share": 0.0})
    assert stats_parts(plain) == ["40 tokens", "12.3 tok/s", "first token 1.2 s", "speculation none", "eos"]
    undrafted = dataclasses.replace(FINAL, stats=STATS | {"drafted": {}}, finish_reason="repeat")
    assert "acceptance n/a" in stats_parts(undrafted)
    assert stats_parts(undrafted)[-1] == "stopped: the answer was repeating itself"


def test_a_gated_answer_gets_the_gates_reason_in_place_of_the_stats():
    gated = dataclasses.replace(FINAL, gated=True, finish_reason="gated", stats={})
    gated = dataclasses.replace(gated, relevance=FINAL.relevance | {"covered": False})
    (reason,) = stats_parts(gated)
    assert reason.startswith("not answered: the closest source matches the question at 0.40")


def test_the_gates_reason_never_shows_a_score_equal_to_the_threshold_it_fell_below():
    # the web chat showed "log-odds 0.62, below 0.62" for a judge at 0.6152 against 0.618 (session 45)
    close = FINAL.relevance | {"similarity": 0.4852, "threshold": 0.49, "judged": 0.6152, "judge_threshold": 0.618}
    gated = dataclasses.replace(FINAL, gated=True, finish_reason="gated", stats={}, relevance=close)
    (reason,) = stats_parts(gated)
    assert "matches the question at 0.485, below the relevance gate's 0.490" in reason
    assert reason.endswith("(log-odds 0.615, below 0.618)")
    apart = close | {"similarity": 0.30, "judged": -1.254}
    (reason,) = stats_parts(dataclasses.replace(gated, relevance=apart))
    assert "at 0.30, below the relevance gate's 0.49" in reason and "(log-odds -1.25, below 0.62)" in reason


def test_checks_warn_about_ungrounded_items_and_note_adapted_ones_but_not_for_a_withheld_answer():
    notes = check_notes(FINAL, code=lambda text: f"<{text}>")
    assert notes == [
        ("warning", "command <scontrol drain <node>> is not found in the sources; "
                    "nearest in [1]: <scontrol update State=DRAIN>"),
        ("note", "<--gpus-per-node=2> is a source's option with your own values; check them"),
    ]  # fmt: skip
    weak = dataclasses.replace(FINAL, relevance=FINAL.relevance | {"covered": False})
    withheld = dataclasses.replace(weak, withheld="Withheld.", citations=Citations([9], [9], {}, []))
    # a withheld answer's text is not shown, so neither are its items; the weak match still is
    assert check_notes(withheld, code=str) == [
        ("warning", "the sources may not cover this question (the closest source matches the question at 0.40, "
                    "below the relevance gate's 0.50): check the answer against them"),
    ]  # fmt: skip
    invalid = check_notes(dataclasses.replace(withheld, withheld=""), code=str)
    assert invalid[-1] == ("warning", "the answer cites passages that do not exist: [9]") and len(invalid) == 4


def test_ask_slack_and_the_web_chat_show_the_same_stats_and_checks(capsys):
    ask.print_summary(FINAL)
    err = capsys.readouterr().err
    footer = slack_render.footer(FINAL)
    details = web_render.details_html(FINAL)
    for part in stats_parts(FINAL):
        assert part in err and part in footer and part in details
    assert "  warning: command `scontrol drain <node>` is not found in the sources" in err
    assert ":warning: command `scontrol drain &lt;node&gt;` is not found in the sources" in footer
    assert "  note: `--gpus-per-node=2` is a source's option with your own values; check them" in err


def test_source_paths_lose_the_folders_all_sources_share_and_keep_what_tells_them_apart():
    cache = "/root/.cache/specrag/corpora"
    slurm = [{"number": n, "path": f"{cache}/slurm/html/{name}"} for n, name in ((1, "squeue.html"), (2, "faq.html"))]
    assert shown_paths(slurm) == {1: "squeue.html", 2: "faq.html"}
    mixed = [*slurm, {"number": 3, "path": f"{cache}/runbooks/cvmfs-problems.md"}]
    assert shown_paths(mixed) == {
        1: "slurm/html/squeue.html", 2: "slurm/html/faq.html", 3: "runbooks/cvmfs-problems.md"
    }  # fmt: skip
    assert shown_paths([{"number": 4, "path": "runbooks/nodes-0.md"}]) == {4: "runbooks/nodes-0.md"}  # as given


def test_every_front_end_shows_the_short_path(capsys):
    path = "/root/.cache/specrag/corpora/slurm/html/squeue.html"
    source = {"number": 1, "title": "squeue", "heading": "OPTIONS", "path": path, "score": 0.5, "cited": True,
              "copied_tokens": 0, "text": "squeue -u $USER"}  # fmt: skip
    final = dataclasses.replace(FINAL, sources=[source])
    ask.print_summary(final)
    assert "  [1] squeue › OPTIONS (squeue.html, score 0.500) - cited" in capsys.readouterr().err
    assert "1. squeue › OPTIONS — `squeue.html`" in slack_render.footer(final)
    assert f'<span class="sr-path" title="{path}">squeue.html · score 0.500</span>' in web_render.details_html(final)


def test_a_refusal_names_its_nearest_sources_by_the_paths_the_sources_list_shows():
    from app.copilot.events import Passage
    from app.copilot.gate import REFUSAL, refusal_text

    html = "/root/.cache/specrag/corpora/slurm/html"
    nearest = [Passage(1, "t", f"{html}/download.html", "Download Slurm"), Passage(2, "t", f"{html}/faq.html", "FAQ")]
    text = refusal_text([*nearest, Passage(4, "t", "runbooks/drain.md", "Drain")])
    assert text.startswith(REFUSAL) and "/root/.cache" not in text  # the cache folder says nothing
    assert "- [1] Download Slurm (download.html)" in text and "- [4] Drain (runbooks/drain.md)" in text
    assert refusal_text([Passage(3, "t", f"{html}/sinfo.html", "sinfo")]).endswith("- [3] sinfo (sinfo.html)")


def test_a_refusal_names_three_different_places_when_two_passages_share_one():
    from app.copilot.events import Passage
    from app.copilot.gate import refusal_text

    conf = "topology.conf.html"
    passages = [
        Passage(1, "a", conf, "topology.conf", "DESCRIPTION"),
        Passage(2, "b", conf, "topology.conf", "DESCRIPTION"),
    ]
    passages += [
        Passage(3, "c", "topology.html", "Topology Guide"),
        Passage(4, "d", "sbatch.html", "sbatch", "OPTIONS"),
    ]
    listed = [line.split("]")[0] for line in refusal_text(passages).splitlines() if line.startswith("- [")]
    assert listed == ["- [1", "- [3", "- [4"]


def test_a_refusal_says_which_nearest_source_holds_a_line_the_question_pasted():
    from app.copilot.events import Passage
    from app.copilot.gate import refusal_text

    logged = "Logs show it, e.g.\nerror: Munge decode failed: Expired credential\nENCODED: Wed May 12"
    faq = Passage(1, logged, "faq.html", "FAQ")
    conf = Passage(2, "Errors seen on all of the compute nodes mean the clocks drift.", "slurm.conf.html", "slurm.conf")
    question = (
        "seeing this on all of the compute nodes, how do I fix it?\n"
        "[2026-12-06T08:14:05.880] error: Munge decode failed: Expired credential\n"
        "[2026-12-06T08:14:05.881] error: slurm_unpack_received_msg: Protocol authentication error"
    )
    lines = refusal_text([faq, conf], question).splitlines()
    pasted = "`error: Munge decode failed: Expired credential`"
    assert lines[2] == f"- [1] FAQ (faq.html), which has what you pasted: {pasted}"
    # the asking prose it shares with [2] ("on all of the compute nodes", plain words) is no pasted line
    assert lines[3] == "- [2] slurm.conf (slurm.conf.html)"
    assert refusal_text([faq]) == refusal_text([faq], "How do I restart munge?")  # nothing pasted, nothing said
