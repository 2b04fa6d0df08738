"""A source's sentence told of another setting: fresh3 g-03 wrote slurm.conf's OverTimeLimit sentence again
with KillWait as its subject."""

from app.copilot import Passage
from app.copilot.summary import definition
from app.copilot.swapped import swapped_subjects

SLURM_CONF = (
    "If a job exceeds its time limit it is sent SIGTERM followed by SIGKILL.  The\n"
    "interval between signals is specified by the Slurm configuration\n"
    "parameter KillWait.  The OverTimeLimit configuration parameter may\n"
    "permit the job to run longer than scheduled.  Time resolution is one minute\n"
    "and second values are rounded up to the next minute."
)
PASSAGES = [Passage(1, SLURM_CONF, "slurm.conf.html", "slurm.conf", "PARAMETERS")]


def test_a_sources_sentence_told_of_another_setting_is_reported_with_whose_words_they_are():
    answer = (
        "[1] The OverTimeLimit configuration parameter may permit the job to run longer than scheduled.\n\n"
        "[1] The `KillWait` configuration parameter may permit the job to run longer than scheduled."
    )
    [swapped] = swapped_subjects(answer, PASSAGES)
    assert (swapped.said_of, swapped.term, swapped.source) == ("KillWait", "OverTimeLimit", 1)
    assert swapped.quoted == "configuration parameter may permit the job to run longer than scheduled."
    assert definition(swapped, lambda text: f"`{text}`") == (
        "“configuration parameter may permit the job to run longer th…” is what [1] (slurm.conf) "
        "says of `OverTimeLimit`, not of `KillWait`: check it"
    )


def test_the_sources_own_subject_a_sentence_start_and_short_runs_pass():
    answers = [
        "[1] The OverTimeLimit configuration parameter may permit the job to run longer than scheduled.",
        # the source's sentence opens the quote: no subject to swap ("Time resolution ...")
        "[1] For KillWait, time resolution is one minute and second values are rounded up.",
        # a plain word before the quote is no setting
        "[1] This configuration parameter may permit the job to run longer than scheduled.",
        # four words are a phrase, not a sentence's predicate
        "[1] KillWait may permit the job to start.",
    ]
    for answer in answers:
        assert swapped_subjects(answer, PASSAGES) == [], answer


def test_a_source_sentence_that_names_both_settings_is_no_swap():
    both = Passage(1, "With KillWait set, the OverTimeLimit parameter adds minutes to the time limit.", "a.html")
    answer = "[1] The KillWait parameter adds minutes to the time limit."
    assert swapped_subjects(answer, [both]) == []
