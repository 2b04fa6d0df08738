"""A follow-up's answer leaves out the sentences an earlier answer of its conversation already said."""

from copilot_fakes import scripted_follow_up

from app.copilot.said_before import said_before

# session 56, follow-up hfu-01: "And how do I continue it later?" after suspending a job
SUSPEND = (
    "[4] Use the `scontrol suspend` command to suspend a running job:\n\n```\nscontrol suspend <job_list>\n```\n\n"
    "This command suspends the specified job(s). The job list is a comma-separated list of job IDs. "
    "Not all architectures and configurations support job suspension."
)
RESUME = (
    "[2] Use the `resume` command to resume a previously suspended job:\n\n```\nresume <job_list>\n```\n\n"
    "This command resumes the specified job(s). The job list is a comma-separated list of job IDs. "
    "Not all architectures and configurations support job suspension [1]."
)


def test_sentences_an_earlier_answer_said_go_markers_and_case_aside_and_new_ones_stay():
    assert said_before(RESUME, [SUSPEND]) == [
        "The job list is a comma-separated list of job IDs.",
        "Not all architectures and configurations support job suspension [1].",
    ]
    assert said_before(RESUME, []) == [] and said_before(RESUME, ["[1] Something else entirely, at length."]) == []
    # a short sentence may well come again
    assert said_before("[2] Use `resume`. The sources do not cover this.", ["The sources do not cover this."]) == []


def test_an_answer_with_nothing_of_its_own_left_or_only_earlier_code_stays_whole():
    # nothing but said sentences: repeats_earlier_answer warns of that one instead
    assert said_before("[3] The job list is a comma-separated list of job IDs.", [SUSPEND]) == []
    # session 56, f3nt-05: heterogeneous jobs answered with the array's command again; the copied sentence around
    # it ("This will submit a job array...") is what shows that it answers the earlier question
    array = "[1] Submit it:\n\n```\nsbatch --array=1-3 -N1 tmp\n```\n\nThis will submit a job array with three jobs."
    hetjob = "[1] Submit a heterogeneous job:\n\n```\nsbatch --array=1-3 -N1 tmp\n```\n\n" + array.split("\n\n")[-1]
    assert said_before(hetjob, [array]) == []


def test_the_front_ends_leave_a_said_sentence_out_of_a_follow_up_with_a_note(tiny_engine, monkeypatch):
    from app.copilot.summary import check_notes
    from app.web import render

    docs = [("scontrol.md", SUSPEND.removeprefix("[4] ")), ("resume.md", "resume <job_list> resumes a job.")]
    first, follow_up = scripted_follow_up(
        monkeypatch, docs, ("How do I suspend a running job?", SUSPEND), ("And how do I continue it later?", RESUME)
    )
    assert first.said_before == [] and "comma-separated list of job IDs" in first.shown
    assert follow_up.said_before == said_before(RESUME, [SUSPEND])
    assert follow_up.shown.endswith("```\nresume <job_list>\n```\n\nThis command resumes the specified job(s).")
    assert follow_up.answer == RESUME  # the model's own text stays, and so does the conversation's copy
    assert follow_up.turn.answer == RESUME
    notes = [text for level, text in check_notes(follow_up, code=str) if level == "note"]
    said = "left out 2 sentences that an earlier answer above says word for word (“The job list is a comma-separated"
    assert [text for text in notes if text.startswith("left out")] == [said + " list of job IDs.” and more)"]
    assert said in render.details_html(follow_up)
    assert "job IDs." not in "".join(segment.text for segment in follow_up.citations.segments)
