"""An answer stopped for repeating itself shows each sentence once, in every front end."""

import pytest
from copilot_fakes import FakeRetriever, script_answer

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, loading
from app.copilot.repeats import collapse_repeats
from app.web.session import Exchange

MUNGE = "All nodes in the cluster must be configured with the same munge.key file."


def test_a_sentence_repeated_under_new_markers_is_shown_once_and_the_cut_restart_goes():
    looped = f"[1] {MUNGE} Start munged first.\n\n[2] {MUNGE}\n\n[3] {MUNGE}\n\n[4] All nodes in the clus"
    assert collapse_repeats(looped) == f"[1] {MUNGE} Start munged first."


def test_sentences_that_say_something_new_stay_and_so_do_short_repeated_lines():
    text = (
        f"[1] {MUNGE}\n```\nsystemctl restart munge\n```\n[2] Then check it:\n```\nmunge -n | unmunge\n```\n"
        f"[3] {MUNGE} Check the clocks with NTP."
    )
    assert collapse_repeats(text) == (
        f"[1] {MUNGE}\n```\nsystemctl restart munge\n```\n[2] Then check it:\n```\nmunge -n | unmunge\n```\n"
        "[3] Check the clocks with NTP."
    )


def test_a_code_block_of_repeated_lines_goes_whole_and_a_block_left_open_stays():
    block = "```\nscontrol update NodeName=n1 State=RESUME\n```"
    text = f"[1] Resume it:\n{block}\n[2] Resume it again:\n{block}\n[3] Or:\n```\nscontrol update NodeName=n1 State=RE"
    assert collapse_repeats(text) == f"[1] Resume it:\n{block}\n[2] Resume it again:\n[3] Or:"


@pytest.mark.parametrize("finish, collapsed", [("repeat", True), ("eos", False)])
def test_the_pipeline_shows_a_repeating_answer_collapsed_and_keeps_the_raw_one(
    tiny_engine, monkeypatch, finish, collapsed
):
    docs = [("munge.md", f"{MUNGE} Start munged before the Slurm daemons."), ("ntp.md", "Keep clocks in sync.")]
    options = CopilotOptions(answer=AnswerOptions(gate="off"))
    copilot = Copilot(loading.load_engine(ModelOptions()), options, FakeRetriever(docs))
    raw = f"[1] {MUNGE}\n\n[2] {MUNGE}\n\n[1] All nodes"
    script_answer(copilot, monkeypatch, raw, finish=finish)
    events = list(copilot.answer("What must all nodes share for munge?"))
    final = events[-1]
    assert final.answer == raw and final.finish_reason == finish
    assert final.shown == (f"[1] {MUNGE}" if collapsed else raw) == final.to_dict()["shown"]
    # the markers (and the sources marked cited) are the shown text's: [2] cited only a repeat
    assert final.citations.markers == ([1] if collapsed else [1, 2])
    assert [s["number"] for s in final.sources if s["cited"]] == final.citations.markers
    assert final.turn.answer == final.shown  # a follow-up sees the answer as shown
    view = Exchange("What must all nodes share for munge?")
    for event in events:
        view.apply(event)
    assert view.answer == final.shown  # the chat replaces the streamed loop
