"""A sentence that carries the prompt's worked example (backups) into an answer no source backs is warned of."""

import json

from app.copilot.borrowed import EXAMPLE_TOPIC, _stems, borrowed_sentences, without_copied
from app.copilot.events import Passage
from app.copilot.pipeline import final_from_text
from app.copilot.prompting import DEMONSTRATION, SYSTEM_PROMPT
from app.copilot.summary import check_notes
from app.web.render import grounding_html

FAQ = Passage(1, "Change the earliest begin time with scontrol update JobId=1234 StartTime=now.", "faq.html", "FAQ")
QUESTION = "How do I put a user's job on hold so it does not start?"
SEEN = (  # the chat's answer, session 23
    "[1] Change the earliest begin time of the job:\n\n```\nscontrol update JobId=1234 StartTime=now\n```\n\n"
    "This will put the job on hold until the next scheduled backup [1]."
)


def test_every_topic_word_is_the_demonstrations_own():
    demonstration = _stems(json.dumps(DEMONSTRATION))
    assert all(_stems(word) <= demonstration for word in EXAMPLE_TOPIC)


def test_a_sentence_on_the_examples_topic_is_reported_only_when_nothing_else_brought_it_up():
    sentence = "This will put the job on hold until the next scheduled backup [1]."
    assert borrowed_sentences(SEEN, [FAQ.text], QUESTION) == [(sentence, "backup")]
    assert borrowed_sentences(SEEN, [FAQ.text, "The backup controller takes over."], QUESTION) == []
    assert borrowed_sentences(SEEN, [FAQ.text], "Can I restore a job's script?") == []  # the user's topic
    in_code = "[1] Run it:\n\n```\nbkp restore --snapshot latest\n```"
    assert borrowed_sentences(in_code, [FAQ.text], QUESTION) == []  # code is the grounding check's


def test_the_front_ends_warn_of_it_and_a_withheld_answer_shows_nothing_of_it():
    final = final_from_text(QUESTION, [FAQ], SEEN, "eos")
    assert [word for _, word in final.borrowed] == ["backup"]
    warnings = [text for level, text in check_notes(final, code=str) if level == "warning"]
    assert any("which only the prompt's worked example does: it is not from the sources" in w for w in warnings)
    assert "only the prompt&#x27;s worked example does" in grounding_html(final.grounding, (), (), (), final.borrowed)
    uncited = final_from_text(QUESTION, [FAQ], SEEN.replace("[1]", ""), "eos", withheld="withheld: cited nothing")
    assert uncited.withheld and uncited.borrowed == []


ARRAY_QUESTION = "I have 500 input files and want to run the same script on each one. How?"
ARRAYS = Passage(1, "A job array runs one script many times; the backup controller keeps its state.", "job_array.html")
LEAKED = (  # an eval answer (session 26), here with a passage on backup controllers: the topic is no evidence
    "[1] Use a batch script:\n\n```\nsrun run.app $file\n```\n\n"
    "This will run the script on each input file in the `input` directory: backups run nightly at 01:00 [2]."
)


def test_a_run_of_the_examples_words_is_reported_even_where_a_source_speaks_of_its_topic():
    sentence = "This will run the script on each input file in the `input` directory: backups run nightly at 01:00 [2]."
    assert borrowed_sentences(LEAKED, [ARRAYS.text], ARRAY_QUESTION) == [(sentence, "backups run nightly at 01:00")]
    # held by a source, the words are that source's
    assert borrowed_sentences(LEAKED, [ARRAYS.text, "Here backups run nightly at 01:00 too."], ARRAY_QUESTION) == []
    # four words in a row are not a run ("it from the latest"); five are, and only those are named
    assert borrowed_sentences("[1] Take it from the latest.", [ARRAYS.text], ARRAY_QUESTION) == []
    taken = "[1] Take it from the latest snapshot [2]."
    assert borrowed_sentences(taken, [ARRAYS.text], ARRAY_QUESTION) == [(taken, "it from the latest snapshot")]


def test_four_words_of_the_example_with_one_of_its_numbers_are_a_run():
    # fresh-16 (session 32): only four words of the example in a row, one of them its made-up time
    sentence = "Yesterday's node is in it: squeue runs nightly at 01:00 [3]."
    answer = f"[1] Run `squeue -w node`. {sentence}"
    assert borrowed_sentences(answer, [ARRAYS.text], ARRAY_QUESTION) == [(sentence, "nightly at 01:00")]
    assert without_copied(answer, [ARRAYS.text], ARRAY_QUESTION) == (
        "[1] Run `squeue -w node`.",
        [(sentence, "nightly at 01:00")],
    )
    # a source that holds them makes them its own; three words with the number are not a run
    assert borrowed_sentences(sentence, [ARRAYS.text, "The check runs nightly at 01:00."], ARRAY_QUESTION) == []
    assert borrowed_sentences("[1] It begins at 01:00 [2].", [ARRAYS.text], ARRAY_QUESTION) == []
    # the question's own time is the user's: asked for 1am, "start at 01:00" copies nothing of the example's
    at_one = "[1] Run `sbatch --begin=01:00 job.sh`: the job will start at 01:00 [1]."
    assert borrowed_sentences(at_one, [ARRAYS.text], "How do I start my job at 1am?") == []
    assert borrowed_sentences(at_one, [ARRAYS.text], "How do I delay my job?") != []


def test_the_instructed_abstention_is_not_a_run_of_the_example():
    assert "The sources do not cover this." in SYSTEM_PROMPT
    answer = "The sources do not cover this. They give the job array syntax [1], but no limit on files."
    assert borrowed_sentences(answer, [ARRAYS.text], ARRAY_QUESTION) == []


def test_a_sentence_copying_the_examples_words_is_left_out_of_what_every_front_end_shows():
    final = final_from_text(ARRAY_QUESTION, [ARRAYS], LEAKED, "eos")
    sentence = "This will run the script on each input file in the `input` directory: backups run nightly at 01:00 [2]."
    assert final.left_out == [(sentence, "backups run nightly at 01:00")] and final.borrowed == []
    assert final.shown == "[1] Use a batch script:\n\n```\nsrun run.app $file\n```"
    assert final.turn.answer == final.shown  # a follow-up does not build on it either
    assert 2 not in final.citations.valid  # its [2] went with it
    assert all(item.text != "01:00" for item in final.grounding)  # nor is its time listed as unfound
    notes = [text for level, text in check_notes(final, code=str) if level == "note"]
    assert any(n.startswith("left out “This will run") and "“backups run nightly at 01:00”" in n for n in notes)
    assert "left out" in grounding_html(final.grounding, left_out_sentences=final.left_out)


def test_a_copied_sentence_between_others_goes_alone_and_an_answer_of_nothing_else_stays_whole():
    leaked = "Yesterday's file is in it: backups run nightly at 01:00 [2]."
    answer = f"[1] A job array runs one script many times. {leaked} Submit it once."
    final = final_from_text(ARRAY_QUESTION, [ARRAYS], answer, "eos")
    assert final.shown == "[1] A job array runs one script many times. Submit it once."
    only = "Yesterday's file is in it: backups run nightly at 01:00 [1]."
    whole = final_from_text(ARRAY_QUESTION, [ARRAYS], only, "eos")
    assert whole.shown == only and whole.left_out == []
    assert whole.borrowed == [(only, "Yesterday's file is in it: backups run nightly at 01:00")]  # warned of instead


def test_an_unfound_command_with_the_examples_path_or_options_says_where_they_came_from():
    # fresh10 s10-11 (session 56): asked for a script run as root when a job starts, an epilog line wrote its
    # output to the worked example's /srv/restore; "not found in the sources" did not say where that came from
    prolog = Passage(1, "Prolog=/etc/slurm/prolog.sh runs on each node as root when a job starts.", "slurm.conf.html")
    answer = (
        "[1] Add a script:\n\n```\necho started > /srv/restore\nsrun --to node1 hostname\n"
        "bash /etc/slurm/prolog.sh --snapshot\n```\n"
    )
    final = final_from_text("How do I run a script as root when a job starts?", [prolog], answer, "eos")
    marked = {item.text: item.from_example for item in final.grounding}
    assert marked["echo started > /srv/restore"] == ("/srv/restore",)
    assert marked["srun --to node1 hostname"] == ("--to",)
    assert marked["bash /etc/slurm/prolog.sh --snapshot"] == ("--snapshot",)  # the source's path is the source's
    warnings = [text for level, text in check_notes(final, code=lambda t: f"`{t}`") if level == "warning"]
    assert (
        "code `echo started > /srv/restore` is not found in the sources: `/srv/restore` is from the prompt's "
        "worked example, not from a source" in warnings
    )
    html = grounding_html(final.grounding, (), (), (), ())
    assert "<code>/srv/restore</code> is from the prompt's worked example, not from a source" in html
    # a source or the question that has the word makes it theirs: no such note
    mounted = Passage(1, "Backups are mounted at /srv/restore on every node.", "storage.md")
    again = final_from_text("Where are restores mounted?", [mounted], "[1] `ls /srv/restore`", "eos")
    assert all(not item.from_example for item in again.grounding)
