"""A source's example value (job 477, node linux0, 12:30) kept in a command where the question names its own."""

from app.copilot import Passage, Turn
from app.copilot.example_values import example_values, values_by_shape
from app.copilot.grounding import check_grounding
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.web.render import grounding_html

GUIDE = "See it with scontrol show job 477, hold it with scontrol update JobId=477 Priority=0; scontrol reboot linux0."


def test_each_span_is_read_as_one_shape_only():
    shapes = values_by_shape("StartTime=2009-02-06T12:30:00 on cn[001-004] and c042, job 4711 from 10:00 to 12:00")
    assert shapes == {
        "date": ["2009-02-06"],
        "time": ["12:30:00", "10:00", "12:00"],  # a time after a date's T; its digits are no number
        "host": ["cn[001-004]", "c042"],
        "number": ["4711"],
    }
    # counts and sizes are no ids; a version, a port or a range is not a value to swap either
    assert values_by_shape("run 2 tasks with 16G, version 23.02.1, port :6817, array 0-999") == {}


def test_a_kept_example_value_is_named_with_the_questions_own():
    assert example_values("scontrol show job 477", GUIDE, "why is job 4711 still pending?") == (("477", "4711"),)
    assert example_values("scontrol reboot linux0", GUIDE, "node c042 needs a reboot") == (("linux0", "c042"),)
    reservation = "scontrol create reservation StartTime=2009-02-06T12:30:00 Flags=MAINT"
    assert example_values(reservation, f"e.g. {reservation}", "a window on Monday from 06:00") == (
        ("12:30:00", "06:00"),  # the date is not compared: the question names none
    )


def test_no_flag_where_the_item_uses_the_users_value_or_the_question_names_none_or_no_source_has_it():
    assert example_values("scontrol update JobId=4711 Priority=0", GUIDE, "hold job 4711") == ()
    assert example_values("scontrol show job 477", GUIDE, "why is my job still pending?") == ()  # nothing to swap in
    assert example_values("scontrol show job 478", GUIDE, "job 4711") == ()  # 478 is the model's (flagged apart)
    assert example_values("scontrol show job 477", "JobId=14770", "job 4711") == ()  # 477 only inside another id
    assert example_values("scontrol reboot linux0", GUIDE, "job 4711") == ()  # another shape: a host is no job id


def test_a_time_written_with_seconds_or_without_a_leading_zero_is_the_questions_own():
    reservation = "scontrol update Reservation=maint EndTime=2009-02-06T18:00:00"
    assert example_values(reservation, f"e.g. {reservation}", "change its end to 18:00") == ()
    assert example_values("sbatch --begin=9:30 job.sh", "sbatch --begin=9:30 job.sh", "start at 09:30") == ()
    assert example_values("sbatch --begin=9:30:15 j.sh", "sbatch --begin=9:30:15 j.sh", "at 09:30") == (
        ("9:30:15", "09:30"),  # another second is another time
    )


def test_check_grounding_reads_the_conversations_questions_as_the_users_values():
    answer = "Run `scontrol show job 477` [1]."
    items = check_grounding(answer, [GUIDE], "And why is it still pending?")
    assert items[0].found and items[0].examples == ()
    items = check_grounding(answer, [GUIDE], "My job 4711 waits. Why pending?\nAnd why is it still pending?")
    assert items[0].found and items[0].examples == (("477", "4711"),)


def test_a_follow_up_answer_with_the_example_job_is_a_warning_in_every_front_end():
    first = Turn("Can job 4711 start only after job 4700 succeeded?", "Use `--dependency=afterok:4700` [1].")
    final = final_from_text(
        "And how do I see why it is still pending?",
        [Passage(1, GUIDE, "quickstart.html")],
        "[1] Run:\n```\nscontrol show job 477\n```",
        "eos",
        history=[first],
    )
    assert [item.text for item in final.with_examples] == ["scontrol show job 477"]
    notes = check_notes(final, code=lambda text: f"`{text}`")
    expected = (
        "`scontrol show job 477` keeps the sources' example value `477` where your question gives `4711, 4700`: "
        "put yours in before running it"
    )
    assert ("warning", expected) in notes  # `specrag ask` and Slack print these notes
    html = grounding_html(final.grounding)
    assert "Check before running or acting on it" in html and "keeps the sources' example value" in html
    assert "<code>477</code> where your question gives <code>4711, 4700</code>" in html


def test_a_full_host_names_first_label_is_a_host_and_a_files_name_is_not():
    """Seen in the chat (session 58): asked about ce02, a follow-up gave `condor_q -name ce01.northgrid.example.org`."""
    line = "condor_q -name ce01.northgrid.example.org -hold -af ClusterId HoldReason"
    assert example_values(line, line, "CE ce02 has 3000 idle jobs\nand if condor_q shows them all held?") == (
        ("ce01", "ce02"),
    )
    assert values_by_shape("run job1.sh on node12") == {"host": ["node12"]}  # one label after: a file
    assert example_values(line, line, "is ce01 stuck?") == ()  # the question's own host
