"""The follow-up gate benchmark: cosine alone where it passes, the judge in the real conversation where not."""

import json
from dataclasses import replace

import pytest
from copilot_fakes import Embedder, FakeRetriever

from app import bench_follow_up_gate
from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, gate, loading
from core.errors import SpecragError

DOCS = [
    ("drain.md", "Drain a node with scontrol update nodename=NODE state=drain reason=maintenance."),
    ("resume.md", "Resume it with scontrol update nodename=NODE state=resume once the work is done."),
]
ROW = {"id": "c1", "kind": "follow-up", "previous": "How do I drain a node?", "question": "And how do I undo it?"}


class FollowUpRetriever(FakeRetriever):
    """The previous question matches closely; the follow-up at `similarity`, joined to it at `joint` if set."""

    joint: float | None = None

    def retrieve(self, query, k):
        hits = super().retrieve(query, k)
        best = 0.9 if query == ROW["previous"] else self.joint if "\n" in query else None
        return [replace(hit, scores={"dense": best}) for hit in hits] if best is not None else hits


@pytest.fixture
def judging_copilot(tiny_engine, monkeypatch):
    monkeypatch.setitem(gate.THRESHOLDS, "fake-model", 0.5)
    monkeypatch.setitem(gate.JUDGE_THRESHOLDS, "tiny", 0.0)
    copilot = Copilot(
        loading.load_engine(ModelOptions()),
        CopilotOptions(answer=AnswerOptions(max_new_tokens=6)),
        FollowUpRetriever(DOCS, embedder=Embedder("fake-model")),
    )
    copilot.loaded.target = "tiny"
    return copilot


def test_a_close_match_passes_on_cosine_without_the_judge(judging_copilot):
    result = bench_follow_up_gate.decide(judging_copilot, ROW, judging_copilot.options.answer)
    assert result["similarity"] == 0.9 and result["judged"] is None
    assert not result["cosine_refused"] and not result["refused"]


@pytest.mark.parametrize("threshold_offset, refused", [(-0.01, False), (0.01, True)])
def test_below_the_threshold_the_judge_decides_in_the_conversation(
    judging_copilot, monkeypatch, threshold_offset, refused
):
    judging_copilot._retriever.similarity = 0.3
    options = judging_copilot.options.answer
    score = bench_follow_up_gate.decide(judging_copilot, ROW, options)["judged"]
    assert isinstance(score, float)
    monkeypatch.setitem(gate.JUDGE_THRESHOLDS, "tiny", score + threshold_offset)
    queries = judging_copilot._retriever.queries
    queries.clear()
    result = bench_follow_up_gate.decide(judging_copilot, ROW, options)
    assert result["cosine_refused"] and result["judged"] == score and result["refused"] is refused
    # "undo it" leans on the conversation and does not stand alone: searched with the drain question
    assert result["with_previous"] and queries[-1] == "And how do I undo it?\nHow do I drain a node?"
    kinds = bench_follow_up_gate.summarise([result])
    assert kinds == {"follow-up": {"questions": 1, "cosine_refused": 1, "judged": 1, "refused": int(refused)}}
    assert "| follow-up | 1 | 1 | 1 |" in bench_follow_up_gate.table(kinds)


def test_a_conversation_without_its_previous_question_is_a_clear_error(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "x", "kind": "follow-up", "question": "And then?"}) + "\n")
    with pytest.raises(SpecragError, match=r"c.jsonl:1: a conversation needs previous"):
        bench_follow_up_gate.load_conversations([path])
    path.write_text("\n{not json\n")
    with pytest.raises(SpecragError, match=r"c.jsonl:2: not valid JSON"):
        bench_follow_up_gate.load_conversations([path])


@pytest.mark.parametrize("answer, abstained", [("The sources do not cover this.", True), ("Call Bob on 555.", False)])
def test_an_unanswerable_question_the_gate_lets_through_counts_as_abstained_only_if_the_answer_says_so(
    judging_copilot, monkeypatch, answer, abstained
):
    from copilot_fakes import script_answer

    script_answer(judging_copilot, monkeypatch, answer)
    row = ROW | {"kind": "unanswerable", "question": "And who do I have to notify about it?"}
    result = bench_follow_up_gate.decide(judging_copilot, row, judging_copilot.options.answer)
    assert not result["refused"] and result["judged"] is None  # passed on cosine, then answered in full
    assert result["abstained"] is abstained and answer in result["answer"]
    assert bench_follow_up_gate.summarise([result])["unanswerable"]["abstained"] == int(abstained)


@pytest.mark.parametrize("joint", [0.9, None])
def test_judge_all_scores_a_follow_up_searched_with_the_previous_question_as_the_pipeline_judges_it(
    judging_copilot, joint
):
    judging_copilot._retriever.similarity = 0.3  # the follow-up alone falls below cosine: searched joined
    judging_copilot._retriever.joint = joint
    options = judging_copilot.options.answer
    result = bench_follow_up_gate.decide(judging_copilot, ROW, options, judge_all=True)
    assert result["with_previous"] and isinstance(result["judged_all"], float)
    if joint is None:  # joined, still below cosine: the pipeline asked the judge itself, in the same conversation
        assert result["cosine_refused"] and result["judged"] == result["judged_all"]
    else:  # the previous question's words carry it past cosine: no judge asked, unless judge_all
        assert not result["cosine_refused"] and result["judged"] is None
    lone = ROW | {"question": "Who is on call for the storage team tonight?"}  # names its own subject
    assert "judged_all" not in bench_follow_up_gate.decide(judging_copilot, lone, options, judge_all=True)


def test_answer_all_answers_a_follow_up_in_full_and_counts_the_gold_pages_it_cites(judging_copilot, monkeypatch):
    from copilot_fakes import script_answer

    script_answer(judging_copilot, monkeypatch, "[2] Resume it with scontrol update nodename=NODE state=resume.")
    options = judging_copilot.options.answer
    assert "answered" not in bench_follow_up_gate.decide(judging_copilot, ROW | {"gold": ["resume.md"]}, options)
    result = bench_follow_up_gate.decide(judging_copilot, ROW | {"gold": ["resume.md"]}, options, answer_all=True)
    answered = result["answered"]
    assert not result["refused"] and answered["cites_gold"] and "Resume it with" in answered["answer"]
    assert answered["ungrounded"] == 0 and answered["first_token_s"] > 0
    other = bench_follow_up_gate.decide(judging_copilot, ROW | {"gold": ["drain.md"]}, options, answer_all=True)
    assert not other["answered"]["cites_gold"]  # it cites resume.md only
    kinds = bench_follow_up_gate.summarise([result, other])
    assert kinds["follow-up"]["cites_gold"] == 1 and kinds["follow-up"]["ungrounded"] == 0
    assert "follow-up, answered in full: 1 cite a gold page, 0 ungrounded items" in bench_follow_up_gate.table(kinds)
