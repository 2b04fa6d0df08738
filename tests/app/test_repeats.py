"""An answer shows each sentence it repeated once, in every front end; one stopped in a loop, each line."""

import pytest
from copilot_fakes import FakeRetriever, script_answer, scripted_follow_up

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, loading
from app.copilot.repeats import collapse_repeats, repeats_earlier_answer, shown_answer
from app.web.session import Exchange

MUNGE = "All nodes in the cluster must be configured with the same munge.key file."


def test_a_sentence_repeated_under_new_markers_is_shown_once_and_the_cut_restart_goes():
    looped = f"[1] {MUNGE} Start munged first.\n\n[2] {MUNGE}\n\n[3] {MUNGE}\n\n[4] All nodes in the clus"
    assert collapse_repeats(looped) == f"[1] {MUNGE} Start munged first."


def test_a_cut_answer_loses_a_last_line_of_bare_markers_and_one_that_ended_on_its_own_keeps_it():
    # seen in the chat: the loop was stopped right after "[6]", which then cited nothing under the answer
    looped = f"[3] {MUNGE}\n\n[4] {MUNGE}\n\n[5] {MUNGE}\n\n[6]"
    assert shown_answer(looped, "repeat") == f"[3] {MUNGE}"
    assert shown_answer("[1] Start munged first.\n[2]", "length") == "[1] Start munged first."
    assert shown_answer(f"[1] {MUNGE}\n[2]", "eos") == f"[1] {MUNGE}\n[2]"  # not cut: left as written


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


def test_an_answer_that_ended_on_its_own_shows_prose_once_and_keeps_its_code_as_written():
    two_examples = "```\nsbatch --array=0-9 job.sh\n```\nOr with a throttle:\n```\nsbatch --array=0-9 job.sh\n```"
    text = f"[3] {MUNGE}\n\n[4] Start munged first.\n\n[6] {MUNGE}\n{two_examples}\n[1] All nodes in the"
    kept = f"[3] {MUNGE}\n\n[4] Start munged first.\n\n{two_examples}\n[1] All nodes in the"
    assert shown_answer(text, "eos") == kept
    assert shown_answer(text, "repeat").endswith("Or with a throttle:")  # stopped in a loop: repeats go
    as_written = f"[1] {MUNGE}  \n\n\n[2] Start munged first.\n\n"
    assert shown_answer(as_written, "eos") == as_written  # nothing repeated: not even its spacing changes


def test_one_code_block_written_twice_back_to_back_is_shown_once_even_in_an_answer_that_ended_on_its_own():
    # session 56, in the chat: a license reservation's `scontrol create reservation` block came twice in a row
    block = "```\nscontrol create reservation licenses=lustre:1000 \\\n   duration=120\n```"
    text = f"[3] Create a reservation:\n\n{block}\n\n{block}\n\nIt blocks the licenses [3]."
    assert shown_answer(text, "eos") == f"[3] Create a reservation:\n\n{block}\n\nIt blocks the licenses [3]."
    # words between the two blocks make the second one a step of its own, and another block is another command
    stepped = f"{block}\nThen once more on the test cluster:\n{block}\n```\nscontrol show reservation\n```"
    assert shown_answer(stepped, "eos") == stepped


def test_an_answer_cut_by_the_length_limit_loses_the_restart_it_was_cut_in_and_keeps_its_code():
    two_examples = "```\nsbatch --array=0-9 job.sh\n```\nOr with a throttle:\n```\nsbatch --array=0-9 job.sh\n```"
    text = f"[5] {MUNGE}\n{two_examples}\n\n[2] All nodes in the"
    assert shown_answer(text, "length") == f"[5] {MUNGE}\n{two_examples}"
    assert shown_answer(text, "eos") == text  # ended on its own: "All nodes in the" is what it wrote last
    new = f"[5] {MUNGE}\n\n[2] Then restart the"
    assert shown_answer(new, "length") == new  # a cut sentence that says something new stays


def test_a_cut_restart_takes_the_heading_line_that_only_echoes_an_earlier_one_with_it():
    drained = "The node is currently executing a job and will be drained."
    text = f"[5] DRAINING\n{drained}\n\n[2] DRAINING\nThe node is currently executing a"
    assert shown_answer(text, "length") == f"[5] DRAINING\n{drained}"  # seen in the chat: "[2] DRAINING" dangled
    assert shown_answer(text, "eos") == text
    new_heading = text.replace("[2] DRAINING", "[2] DRAINED")
    assert shown_answer(new_heading, "length") == f"[5] DRAINING\n{drained}\n\n[2] DRAINED"  # says something new


@pytest.mark.parametrize("finish, shown", [("repeat", f"[1] {MUNGE}"), ("eos", f"[1] {MUNGE}\n\n[1] All nodes")])
def test_the_pipeline_shows_a_repeating_answer_collapsed_and_keeps_the_raw_one(tiny_engine, monkeypatch, finish, shown):
    docs = [("munge.md", f"{MUNGE} Start munged before the Slurm daemons."), ("ntp.md", "Keep clocks in sync.")]
    options = CopilotOptions(answer=AnswerOptions(gate="off"))
    copilot = Copilot(loading.load_engine(ModelOptions()), options, FakeRetriever(docs))
    raw = f"[1] {MUNGE}\n\n[2] {MUNGE}\n\n[1] All nodes"
    script_answer(copilot, monkeypatch, raw, finish=finish)
    events = list(copilot.answer("What must all nodes share for munge?"))
    final = events[-1]
    assert final.answer == raw and final.finish_reason == finish
    assert final.shown == shown == final.to_dict()["shown"]
    # the markers (and the sources marked cited) are the shown text's: [2] cited only a repeat
    assert final.citations.markers == [1]
    assert [s["number"] for s in final.sources if s["cited"]] == final.citations.markers
    assert "".join(s.text for s in final.citations.segments) == final.shown  # provenance of the shown text
    assert {s.passage for s in final.citations.segments} == {None, 1}  # the munge sentence, quoted from [1]
    assert final.turn.answer == final.shown  # a follow-up sees the answer as shown
    view = Exchange("What must all nodes share for munge?")
    for event in events:
        view.apply(event)
    assert view.answer == final.shown  # the chat replaces the streamed loop


CVMFS = (
    "[1] Drain the node first, then:\n\n```\ncvmfs_config umount\nsystemctl restart autofs\ncvmfs_config probe\n```\n\n"
    "Once the node is drained, reboot it rather than killing processes by hand."
)


def test_an_answer_that_only_says_an_earlier_answer_again_is_told_apart():
    assert repeats_earlier_answer(CVMFS.replace("[1]", "[3]"), ["[2] Something else entirely, at length.", CVMFS])
    # markers, case and spacing aside; one new sentence of its own and it answers something
    assert repeats_earlier_answer(CVMFS.upper().replace("\n\n", "\n"), [CVMFS])
    assert not repeats_earlier_answer(CVMFS + "\n\nTo drain it: `scontrol update State=DRAIN`.", [CVMFS])
    assert not repeats_earlier_answer(CVMFS, [])  # a first question
    assert not repeats_earlier_answer("[2] Yes, the sources say so.", ["[1] Yes, the sources say so."])  # too short


def test_the_front_ends_warn_when_a_follow_up_gets_the_earlier_answer_again(tiny_engine, monkeypatch):
    # session 44, in the chat on the runbooks: "And how do I take it out of the batch system while I fix it?"
    # after a CVMFS question got the CVMFS answer again, word for word
    from app.copilot.summary import REPEATED_EARLIER, check_notes
    from app.web import render

    docs = [("cvmfs.md", CVMFS.removeprefix("[1] ")), ("drain.md", "Drain a node: scontrol update State=DRAIN.")]
    first, follow_up = scripted_follow_up(
        monkeypatch,
        docs,
        ("wn-042 fails jobs with CVMFS errors. What do I do first?", CVMFS),
        ("And how do I take it out of the batch system?", CVMFS),
    )
    assert not first.repeats_earlier and follow_up.repeats_earlier
    assert ("warning", REPEATED_EARLIER) in check_notes(follow_up, code=str)
    assert ("warning", REPEATED_EARLIER) not in check_notes(first, code=str)
    assert "This answer says again, word for word" in render.details_html(follow_up)
    assert "word for word" not in render.details_html(first)


def test_the_cut_restart_of_a_loop_is_not_checked_either_since_nobody_sees_it():
    from app.copilot.events import Passage
    from app.copilot.pipeline import final_from_text

    variable = "SLURM_RESTART_COUNT"
    sentence = f"The job will have the environment variable `{variable}` set to the number of times it was restarted."
    passage = Passage(1, f"- {variable}\n- The number of times the job has been restarted.", "sbatch.html", "sbatch")
    looped = f"[1] {sentence}\n\n[1] {sentence}\n\n[1] The job will have the environment variable `SLURM_RESTART"
    final = final_from_text("How many times was my job requeued?", [passage], looped, "repeat")
    assert final.shown == f"[1] {sentence}"
    # fresh18 (session 61): `SLURM_RESTART`, cut by the stop, was flagged though the shown answer does not hold it
    assert final.ungrounded == [] and [item.text for item in final.grounding] == [variable]
