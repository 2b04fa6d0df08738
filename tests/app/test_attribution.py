"""An item copied from one source under a sentence that cites another is found and shown as such."""

from copilot_fakes import FakeRetriever, script_answer

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, collect, loading
from app.copilot.attribution import attribute
from app.copilot.grounding import check_grounding
from app.copilot.summary import check_notes

PASSAGES = {
    1: "Heterogeneous jobs: each component may have its own resource request.",
    2: "Drain a node with scontrol update NodeName=n1 State=DRAIN Reason=maintenance.",
    3: "sacctmgr modify qos normal set MaxJobsPerUser=4 limits running jobs per user.",
}


def attributed(answer: str, question: str = "") -> dict[str, object]:
    items = check_grounding(answer, list(PASSAGES.values()), question, list(PASSAGES))
    return {item.text: item for item in attribute(answer, items)}


def test_a_sentence_citing_a_source_without_its_command_is_misattributed():
    items = attributed("[1] Limit them with `MaxJobsPerUser=4` in a QOS. Drain with `State=DRAIN` [2].")
    limit, drain = items["MaxJobsPerUser=4"], items["State=DRAIN"]
    assert (limit.holders, limit.cited, limit.misattributed) == ((3,), (1,), True)
    assert (drain.holders, drain.cited, drain.misattributed) == ((2,), (2,), False)


def test_a_fenced_block_answers_to_the_sentence_that_introduces_it():
    answer = "[1] Drain it first:\n\n```\nscontrol update NodeName=n1 State=DRAIN Reason=maintenance\n```\n"
    item = attributed(answer)["scontrol update NodeName=n1 State=DRAIN Reason=maintenance"]
    assert item.cited == (1,) and item.holders == (2,) and item.misattributed
    right = attributed(answer.replace("[1]", "[2]"))["scontrol update NodeName=n1 State=DRAIN Reason=maintenance"]
    assert not right.misattributed


def test_a_sentence_citing_several_sources_is_right_when_one_holds_it():
    assert not attributed("[1][3] Use `MaxJobsPerUser=4`.")["MaxJobsPerUser=4"].misattributed
    assert not attributed("[1] Jobs vary. Use `MaxJobsPerUser=4`.")["MaxJobsPerUser=4"].misattributed  # unmarked


def test_items_with_the_users_values_or_not_found_are_not_judged():
    answer = "[1] Run `scontrol update NodeName=c042 State=DRAIN Reason=maintenance` and `--frobnicate`."
    items = attributed(answer, "c042")
    adapted = items["scontrol update NodeName=c042 State=DRAIN Reason=maintenance"]
    assert adapted.found and adapted.adapted and not adapted.misattributed and adapted.holders == ()
    assert not items["--frobnicate"].found and not items["--frobnicate"].misattributed


def test_every_front_end_gets_a_note_naming_the_source_that_holds_it(tiny_engine, monkeypatch):
    docs = [("hetero.md", PASSAGES[1]), ("drain.md", PASSAGES[2]), ("qos.md", PASSAGES[3])]
    options = CopilotOptions(answer=AnswerOptions(gate="off", passages=3))
    copilot = Copilot(loading.load_engine(ModelOptions()), options, FakeRetriever(docs))
    script_answer(copilot, monkeypatch, "[1] Set `MaxJobsPerUser=4` on the QOS.")
    final = collect(copilot.answer("How do I stop one user running more than 4 jobs?"))
    number = next(p.number for p in final.passages if p.text == PASSAGES[3])
    assert [item.text for item in final.misattributed] == ["MaxJobsPerUser=4"]
    notes = check_notes(final, lambda text: f"`{text}`")
    assert ("note", f"`MaxJobsPerUser=4` is in [{number}], not in [1] that its sentence cites") in notes
