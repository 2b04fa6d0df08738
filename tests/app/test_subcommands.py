"""A command a tool's man page lists, copied without the tool, is noted in every front end."""

from types import SimpleNamespace

from app.copilot.events import GroundingItem, Passage
from app.copilot.grounding import GroundingSources, check_grounding
from app.copilot.pipeline import final_from_text
from app.copilot.subcommands import tool_commands, with_tools
from app.copilot.summary import check_notes
from app.copilot.tool_pages import ToolPages
from app.web.render import grounding_html

COMMANDS = (
    "- help\n- Display a description of scontrol options and commands.\n"
    "- hold <job_list>\n- Prevent a job from starting."
)
SCONTROL = Passage(1, COMMANDS, "scontrol.html", "scontrol", "COMMANDS")
FAQ = Passage(2, "To keep a job from starting, run scontrol hold with its job id.", "faq.html", "FAQ", "For Users")
QUESTION = "How do I put a user's job on hold so it does not start?"


def _hold(answer: str, passages: list[Passage] = [SCONTROL, FAQ]):  # noqa: B006 - read only
    final = final_from_text(QUESTION, passages, answer, "eos")
    return final, {item.text: item for item in final.grounding}


def test_a_listed_command_copied_without_its_tool_is_marked_and_noted_in_every_front_end():
    final, items = _hold("[1] Hold it:\n\n```\nhold <job_list>\n```")
    assert items["hold <job_list>"].found and items["hold <job_list>"].tool == "scontrol"
    assert final.without_tool == [items["hold <job_list>"]]
    notes = [text for _, text in check_notes(final, code=lambda text: f"`{text}`")]
    assert "`hold <job_list>` is listed among scontrol's commands: type it after `scontrol`" in " ".join(notes)
    assert "type it after <code>scontrol</code>" in grounding_html(final.grounding)


def test_written_with_its_tool_anywhere_in_the_answer_it_is_not_noted():
    _, items = _hold("[1] Run `scontrol hold <job_list>`.")
    assert all(not item.tool for item in items.values())
    _, items = _hold("[1] Use the `hold` command:\n\n```\nscontrol hold <job_list>\n```")
    assert not items["hold"].tool  # the answer writes it after scontrol too


def test_only_a_man_page_commands_section_that_lists_it_as_an_entry_counts():
    other_heading = Passage(1, COMMANDS, "scontrol.html", "scontrol", "DESCRIPTION")
    guide_title = Passage(1, COMMANDS, "guide.html", "Quick Start Guide", "COMMANDS")
    in_prose = Passage(1, "Use hold <job_list> to keep jobs back.", "scontrol.html", "scontrol", "COMMANDS")
    for passage in (other_heading, guide_title, in_prose):
        _, items = _hold("[1] Hold it:\n\n```\nhold <job_list>\n```", [passage])
        assert items["hold <job_list>"].found and not items["hold <job_list>"].tool, passage
    also_listed = Passage(2, "- hold <job_list>\n- A guide's own list.", "guide.html", "Guide", "Jobs")
    _, items = _hold("[1] Hold it:\n\n```\nhold <job_list>\n```", [SCONTROL, also_listed])
    assert not items["hold <job_list>"].tool  # another page lists it on its own: whose command it is is unclear


def test_unfound_and_prose_items_are_left_alone():
    unfound = GroundingItem("hold 1234,5678", "code", False)
    option = GroundingItem("--hold", "option", True, holders=(1,))
    assert with_tools([unfound, option], [SCONTROL], "hold 1234,5678 --hold") == [unfound, option]


def test_the_bare_command_beside_its_full_line_gets_no_second_note():
    final, items = _hold("[1] Use the `hold` command:\n\n```\nhold <job_list>\n```")
    assert items["hold <job_list>"].tool == "scontrol" and not items["hold"].tool
    assert final.without_tool == [items["hold <job_list>"]]
    _, items = _hold("[1] Use the `hold` command.")
    assert items["hold"].tool == "scontrol"  # alone, it still gets its note


def _chunk(title: str, heading: str, text: str) -> SimpleNamespace:
    return SimpleNamespace(title=title, heading=heading, text=text)


def test_an_index_gives_each_tool_with_a_commands_section_the_commands_its_page_lists_and_its_examples_use():
    chunks = [
        _chunk("scontrol", "COMMANDS", COMMANDS + "\n- update <SPECIFICATION>\n- Update job or node state."),
        _chunk("scontrol", "EXAMPLES", "$ scontrol show partition\n$ scontrol: quit"),
        _chunk("sreport", "COMMANDS", "- exit\n- Terminate sreport."),
        _chunk("sreport", "REPORT DESCRIPTION", "- job SizesByAccount\n- The amount of time used for job ranges."),
        _chunk("FAQ", "For Users", "Run sreport cluster utilization, or scontrol requeue with a job id."),
        _chunk("sbatch", "OPTIONS", "- array\n- Submit a job array."),  # no COMMANDS section: not a tool's list
    ]
    commands = tool_commands(chunks)
    assert set(commands) == {"scontrol", "sreport"}
    assert {"help", "hold", "update", "show", "requeue"} <= commands["scontrol"]
    assert {"exit", "job", "cluster"} <= commands["sreport"]
    assert not {"change", "move", "Display", "Prevent", "quit"} & commands["scontrol"]
    assert tool_commands(chunks[-2:]) == {}


def test_a_tool_run_with_a_command_it_does_not_take_is_not_found_though_its_words_are_a_passages():
    passage = "To change a job's name, run scontrol update JobId=<job_id> Name=<name> (see --job-name)."
    commands = {"scontrol": frozenset({"update", "show", "hold"})}
    invented, right = "scontrol change --job-name=<name> <job_id>", "scontrol update JobId=<job_id> Name=<name>"
    found = {item.text: item.found for item in check_grounding(f"`{invented}` or `{right}`", [passage], "")}
    assert found == {invented: True, right: True, "--job-name=<name>": True}  # without the list, built from words
    found = {i.text: i.found for i in check_grounding(f"`{invented}` or `{right}`", [passage], "", None, commands)}
    assert found == {invented: False, right: True, "--job-name=<name>": True}
    sources = GroundingSources([passage], "", commands)
    assert not sources.may_complete("scontrol ch") and not sources.may_complete("scontrol change ")
    assert sources.may_complete("scontrol up") and sources.may_complete("scontrol update ")
    assert sources.may_complete("scontrol update JobId=<job_id> Name=")
    assert sources.finds("code", "run scontrol update JobId=<job_id>") == (True, False)  # verbatim stays found


def test_every_front_end_says_the_tool_has_no_such_command():
    passage = Passage(1, "To change a job's name, run scontrol update JobId=<job_id> Name=<name>.", "s.html", "s", "")
    pages = ToolPages({"scontrol": frozenset({"update", "show"})})
    final = final_from_text(QUESTION, [passage], "[1] Run `scontrol change <job_id>`.", "eos", pages=pages)
    (item,) = [item for item in final.grounding if item.text == "scontrol change <job_id>"]
    assert not item.found and item.not_a_command == "change"
    notes = " ".join(text for _, text in check_notes(final, code=lambda text: f"`{text}`"))
    assert "`scontrol change <job_id>` is not found in the sources: `scontrol` has no command `change`" in notes
    assert "<code>scontrol</code> has no command <code>change</code>" in grounding_html(final.grounding)
    plain = final_from_text(QUESTION, [passage], "[1] Run `scontrol change <job_id>`.", "eos")
    assert [i.found for i in plain.grounding if i.text == "scontrol change <job_id>"] == [True]  # no list: words
