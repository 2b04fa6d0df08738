"""A sentence whose quotes and commands all stand in one source it does not cite is shown citing that source."""

from copilot_fakes import FakeRetriever, script_answer

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, collect, loading
from app.copilot.attribution import attribute
from app.copilot.events import Recitation, Segment
from app.copilot.grounding import check_grounding
from app.copilot.quotes import mark_quotes
from app.copilot.recite import recite
from app.copilot.summary import check_notes

PASSAGES = {
    1: "Heterogeneous jobs: each component may have its own resource request.",
    2: "Drain a node with scontrol update NodeName=n1 State=DRAIN Reason=maintenance.",
    3: "sacctmgr modify qos normal set MaxJobsPerUser=4 limits running jobs per user.",
}


def recited(answer: str) -> tuple[str, list[Recitation]]:
    items = attribute(answer, check_grounding(answer, list(PASSAGES.values()), "", list(PASSAGES)))
    return recite(answer, mark_quotes([Segment(answer)], PASSAGES), items, PASSAGES)


def test_a_sentence_quoting_one_uncited_source_is_shown_citing_it():
    text, moved = recited("[1] Drain a node with scontrol update and give a reason. [3] Then set a limit.")
    assert text == "[2] Drain a node with scontrol update and give a reason. [3] Then set a limit."
    assert moved == [Recitation((1,), 2, "Drain a node with scontrol update")]


def test_its_later_markers_go_and_a_command_in_its_code_block_counts():
    text, moved = recited("Drain a node with scontrol update [1][3].")
    assert (text, moved) == ("Drain a node with scontrol update [2].", [Recitation((1, 3), 2, moved[0].evidence)])
    block = "```\nscontrol update NodeName=n1 State=DRAIN Reason=maintenance\n```"
    text, moved = recited(f"[3] Run this:\n{block}\n[1] Each component may have its own resource request.")
    assert text == f"[2] Run this:\n{block}\n[1] Each component may have its own resource request."
    assert [(m.written, m.now) for m in moved] == [((3,), 2)]


def test_a_sentence_partly_right_spread_over_sources_citing_nothing_or_quoting_little_keeps_its_markers():
    partly = "[1][2] Drain a node with scontrol update; each component may have its own resource request."
    spread = "[1] Drain a node with scontrol update, then set MaxJobsPerUser=4 limits running jobs per user."
    bare = "Drain a node with scontrol update and give a reason."
    made_up = "[1] Reboot the node with the power button."
    short = "[3] Mind its own resource request here."  # a four-word run: common enough to be chance
    for answer in (partly, spread, bare, made_up, short):
        assert recited(answer) == (answer, [])


def test_the_pipeline_shows_the_corrected_citation_and_keeps_the_answer_as_generated(tiny_engine, monkeypatch):
    from app.web.render import grounding_html

    docs = [("hetero.md", PASSAGES[1]), ("drain.md", PASSAGES[2]), ("qos.md", PASSAGES[3])]
    copilot = Copilot(
        loading.load_engine(ModelOptions()),
        CopilotOptions(answer=AnswerOptions(gate="off", passages=3)),
        FakeRetriever(docs),
    )
    raw = "[9] Drain a node with scontrol update and give a reason."
    script_answer(copilot, monkeypatch, raw.replace("[9]", "[1]"))
    final = collect(copilot.answer("How do I drain a node?"))
    drain = next(p.number for p in final.passages if p.text == PASSAGES[2])
    assert drain != 1  # the fake retriever ranks the drain page below another: the model's [1] is wrong
    assert final.answer == final.turn.answer == raw.replace("[9]", "[1]")  # as generated, and so in the KV cache
    assert final.shown == final.to_dict()["shown"] == raw.replace("[9]", f"[{drain}]")
    assert final.citations.markers == [drain] and [s["number"] for s in final.sources if s["cited"]] == [drain]
    assert final.misquoted == [] and [q.cited for q in final.quotes] == [(drain,)]
    note = f"citation corrected to [{drain}] (the model wrote [1]): “Drain a node with scontrol update” is in [{drain}]"
    assert ("note", note) in check_notes(final, lambda text: f"`{text}`")
    assert note in grounding_html(final.grounding, final.citations.invalid, final.misquoted, final.recitations)
