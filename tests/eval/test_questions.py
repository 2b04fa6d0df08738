"""Question rows: ours, Spec-Bench's, and malformed ones skipped with their line numbers."""

import json
from pathlib import Path

import pytest

from app.eval.questions import ignored_fields, read_questions
from core.errors import SpecragError

SPEC_BENCH = Path("/work/shared/benchmarks/spec_bench/rag.jsonl")
SLURM = Path(__file__).parents[2] / "corpora" / "slurm" / "questions.jsonl"


def write(tmp_path, lines):
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def test_our_rows_with_every_field(tmp_path):
    path = write(
        tmp_path,
        [
            {
                "id": "a",
                "question": " How? ",
                "reference_answer": "Like so.",
                "reference_answers": ["Thus."],
                "answer_keywords": ["so"],
                "gold_sources": ["x.html"],
                "kind": "howto",
                "extra": 1,
            },
            {"id": 7, "question": "Out of scope?", "gold_sources": []},
            {"id": "old", "question": "Old style", "gold": ["y.html"], "answer_hint": "hint"},
        ],
    )
    questions, skipped = read_questions(path)
    assert skipped == []
    first, second, third = questions
    assert (first.id, first.question, first.references, first.keywords) == ("a", "How?", ("Like so.", "Thus."), ("so",))
    assert first.gold_sources == ("x.html",) and first.kind == "howto" and not first.unanswerable
    assert second.id == "7" and second.unanswerable
    assert third.gold_sources == ("y.html",) and third.hint == "hint" and third.line == 3


def test_malformed_rows_are_skipped_with_their_line_numbers(tmp_path):
    path = write(
        tmp_path,
        [
            {"id": "ok1", "question": "fine"},
            "{not json",
            "[1, 2]",
            {"question": "no id"},
            {"id": "q", "question": ""},
            {"id": "q2", "question": "bad keywords", "answer_keywords": "sbatch"},
            {"id": "q3", "question": "bad gold", "gold_sources": [1, 2]},
            {"id": "q4", "question": "bad kind", "kind": 3},
            {"id": "ok1", "question": "duplicate"},
            {"turns": "not a list", "category": "rag"},
            "",
            {"id": "ok2", "question": "also fine"},
        ],
    )
    questions, skipped = read_questions(path)
    assert [q.id for q in questions] == ["ok1", "ok2"]
    assert [m.split(": skipped")[0] for m in skipped] == [f"{path}:{n}" for n in range(2, 11)]
    joined = "\n".join(skipped)
    for why in (
        "not valid JSON",
        "expected a JSON object",
        "missing 'id'",
        "missing or empty 'question'",
        "'answer_keywords' must be a list of strings",
        "'gold_sources' must be a list",
        "'kind' must be a string",
        "duplicate id 'ok1'",
        "not a Spec-Bench row",
    ):
        assert why in joined


def test_spec_bench_rows_bring_their_passages(tmp_path):
    turn = "Passage one about forests.\nPassage two about trees.\nWhat do forests give us?"
    path = write(
        tmp_path, [{"question_id": 481, "category": "rag", "turns": [turn], "reference": [["lumber", "water"]]}]
    )
    (question,), skipped = read_questions(path)
    assert skipped == []
    assert question.id == "481" and question.kind == "rag"
    assert question.question == "What do forests give us?"
    assert question.chunks == ("Passage one about forests.", "Passage two about trees.")
    assert question.references == ("lumber", "water") and question.gold_sources is None


def test_limit_counts_valid_questions_and_bad_input_is_an_error(tmp_path):
    path = write(tmp_path, ["oops", {"id": 1, "question": "a"}, {"id": 2, "question": "b"}, {"id": 3, "question": "c"}])
    questions, skipped = read_questions(path, limit=2)
    assert [q.id for q in questions] == ["1", "2"] and len(skipped) == 1
    with pytest.raises(SpecragError, match="--limit"):
        read_questions(path, limit=0)
    with pytest.raises(SpecragError, match="cannot read"):
        read_questions(tmp_path / "missing.jsonl")


def test_the_slurm_question_set_reads_cleanly():
    questions, skipped = read_questions(SLURM)
    assert skipped == [] and len(questions) >= 60
    assert all(q.references for q in questions)
    assert all(q.keywords for q in questions if not q.unanswerable)
    assert sum(q.unanswerable for q in questions) >= 5


@pytest.mark.skipif(not SPEC_BENCH.exists(), reason="shared Spec-Bench file not present")
def test_the_first_spec_bench_rag_questions_read_cleanly():
    questions, skipped = read_questions(SPEC_BENCH, limit=10)
    assert skipped == [] and len(questions) == 10
    assert all(q.chunks and q.references for q in questions)


@pytest.mark.parametrize(
    "path",
    [*sorted(SLURM.parent.glob("*questions.jsonl")), *sorted(SLURM.parents[1].glob("runbook*questions.jsonl"))],
    ids=lambda path: path.name,
)
def test_every_bundled_question_set_reads_whole(path):
    questions, skipped = read_questions(path)
    assert skipped == [] and questions, skipped
    for question in questions:  # an unanswerable one has no gold page and no keyword; others have a gold page
        if question.unanswerable:
            assert not question.keywords, question.id
        else:
            assert question.gold_sources, question.id


def test_unanswerable_true_is_an_empty_gold_list_and_a_misspelt_field_is_named(tmp_path):
    path = write(
        tmp_path,
        [
            {"id": "a", "question": "What does S3 cost per GB?", "unanswerable": True},
            {"id": "b", "question": "Exit code 130?", "unanswerable": False, "answer_keyword": ["Ctrl-C"]},
            {"id": "c", "question": "Both?", "unanswerable": True, "gold_sources": ["x.rst"]},
            {"id": "d", "question": "Yes?", "unanswerable": "yes"},
        ],
    )
    questions, skipped = read_questions(path)
    assert [(q.id, q.unanswerable, q.gold_sources) for q in questions] == [("a", True, ()), ("b", False, None)]
    assert [message.split(": skipped: ")[1] for message in skipped] == [
        "'unanswerable' is true but 'gold_sources' names sources that answer it",
        "field 'unanswerable' must be true or false, got \"yes\"",
    ]
    note = ignored_fields(path)
    assert note.startswith(f"{path}: ignored fields 'answer_keyword' (1 row);") and "answer_keywords" in note
    assert ignored_fields(SLURM) is None and ignored_fields(SPEC_BENCH) is None
