"""A setting put in a configuration file whose own man page never names it is a warning in every front end."""

from types import SimpleNamespace

from app.copilot.config_files import config_settings, misplaced_settings
from app.copilot.events import MisplacedSetting, Passage
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.copilot.tool_pages import read_tool_pages
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.slack.render import footer
from app.web.render import details_html

CHUNKS = [
    SimpleNamespace(title="slurm.conf", heading="PARAMETERS", source="slurm.conf.html",
                    text="- DefMemPerCPU\n- Default real memory size available per allocated CPU in megabytes."),
    SimpleNamespace(title="slurm.conf", heading="PARAMETERS", source="slurm.conf.html",
                    text="- MaxJobCount\n- The maximum number of jobs slurmctld can have in memory at one time."),
    SimpleNamespace(title="cgroup.conf", heading="PARAMETERS", source="cgroup.conf.html",
                    text="- ConstrainRAMSpace\n- If configured to yes then constrain the job's RAM usage."),
    SimpleNamespace(title="Resource Limits", heading="QOS", source="resource_limits.html",
                    text="- MaxJobsPerUser\n- The maximum number of jobs a user can have running at a given time."),
]  # fmt: skip
LIMITS = Passage(3, CHUNKS[3].text, "resource_limits.html", "Resource Limits", "QOS")
QUESTION = "How can I limit one user to 4 running jobs at a time?"
# seen in the chat (session 59): MaxJobsPerUser is a QOS and association limit, which slurm.conf never names
WRONG = "[3] Set the `MaxJobsPerUser` parameter to 4 in the slurm.conf file:\n\n```\nMaxJobsPerUser=4\n```"


def test_each_configuration_page_keeps_the_settings_it_names():
    assert config_settings(CHUNKS) == {
        "slurm.conf": frozenset({"defmempercpu", "maxjobcount"}),
        "cgroup.conf": frozenset({"constrainramspace"}),
    }  # a guide's page is no configuration file


def test_a_setting_put_in_a_file_that_never_names_it_is_reported_with_the_passage_defining_it():
    settings = config_settings(CHUNKS)
    assert misplaced_settings(WRONG, settings, [LIMITS]) == [
        MisplacedSetting("MaxJobsPerUser", "slurm.conf", 3, "Resource Limits")
    ]
    fine = [
        "[1] Set DefMemPerCPU in slurm.conf.",  # its own file
        "[1] Set defmempercpu=2000 in slurm.conf.",  # any case, as Slurm reads keys; not CamelCase anyway
        "[1] MaxJobsPerUser is a QOS limit, not a slurm.conf or cgroup.conf setting.",  # two files: not judged
        "[1] Set MaxJobsPerUser on the QOS with sacctmgr.",  # no file named
    ]
    assert [misplaced_settings(answer, settings, [LIMITS]) for answer in fine] == [[], [], [], []]
    assert misplaced_settings(WRONG, {}, [LIMITS]) == []  # an index without configuration pages: no check


def test_every_front_end_warns_and_the_eval_records_it():
    final = final_from_text(QUESTION, [LIMITS], WRONG, "eos", pages=read_tool_pages(CHUNKS))
    expected = (
        "the answer puts `MaxJobsPerUser` in `slurm.conf`, whose man page never names it; [3] (Resource Limits) "
        "defines it: check where it is set"
    )
    assert ("warning", expected) in check_notes(final, code=lambda text: f"`{text}`")
    assert "whose man page never names it" in details_html(final)
    assert ":warning: the answer puts `MaxJobsPerUser` in `slurm.conf`" in footer(final)  # Slack
    assert answer_record(final, Question("q", QUESTION))["misplaced_settings"] == [["MaxJobsPerUser", "slurm.conf", 3]]
