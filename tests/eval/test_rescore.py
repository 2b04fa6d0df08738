"""Saved eval answers scored again with the current checks, without the model."""

import json

import pytest

from app.eval.questions import read_questions
from app.eval.rescore import chunk_texts, live_chunks, main, rescore_rows
from app.eval.results import load_rows
from app.eval_cmd import run

from .evalkit import factory
from .test_eval_cmd import QUESTIONS, eval_args, write_questions


@pytest.fixture
def saved(tmp_path, fake_index, loaded_tiny):
    """An eval run of the tiny models, plain decoding (nothing drafted), gate off: every row has an answer."""
    questions = write_questions(tmp_path / "q.jsonl", QUESTIONS)
    out = tmp_path / "out"
    assert (
        run(eval_args(questions, out, "--speculation", "none", "--gate", "off"), factory(fake_index, loaded_tiny)) == 0
    )
    return questions, out / "results.jsonl"


def test_rescoring_reproduces_the_rows_the_eval_wrote_and_scores_an_edited_text_afresh(saved, fake_index):
    questions_path, results = saved
    rows, _ = load_rows(results)
    questions = {q.id: q for q in read_questions(questions_path)[0]}
    rescored, kept = rescore_rows(rows, questions, chunk_texts(live_chunks(fake_index)))
    assert kept == {"no answer": 0, "gated": 0, "drafted": 0}
    assert json.loads(json.dumps(rescored)) == rows  # the same checks give the same rows

    munge = next(row for row in rows if row["id"] == "munge")
    edited = munge | {"answer": munge["answer"] | {"text": "[1] Stop munged, then copy the munge.key to every node."}}
    edited["answer"]["relevance"] = {"similarity": 0.45, "judged": 1.2, "covered": True}  # as an eval with a judge
    (again,), _ = rescore_rows([edited], questions, chunk_texts(live_chunks(fake_index)))
    assert again["answer"]["relevance"] == edited["answer"]["relevance"]
    assert again["answer"]["keyword_recall"] == 1.0 and again["answer"]["citations"]["markers"] == [1]
    assert munge["answer"]["keyword_recall"] != 1.0  # the tiny model's own text said neither keyword


def test_drafted_and_gated_rows_are_kept_and_a_lost_chunk_is_an_error(saved, fake_index, tmp_path, capsys):
    questions_path, results = saved
    rows, _ = load_rows(results)
    questions = {q.id: q for q in read_questions(questions_path)[0]}
    # a row from before copied_spans were recorded: where its copies lie is unknown
    old_citations = {k: v for k, v in rows[0]["answer"]["citations"].items() if k != "copied_spans"}
    drafted = rows[0] | {"answer": rows[0]["answer"] | {"citations": old_citations | {"copied": {"1": 3}}}}
    gated = rows[1] | {"answer": rows[1]["answer"] | {"finish_reason": "gated"}}
    rescored, kept = rescore_rows([drafted, gated, rows[2]], questions, chunk_texts(live_chunks(fake_index)))
    assert rescored[:2] == [drafted, gated] and kept == {"no answer": 0, "gated": 1, "drafted": 1}
    # a refusal's source titles once scored keywords: a gated answerable question now says nothing
    titled = gated | {"unanswerable": False, "answer": gated["answer"] | {"keyword_recall": 1.0, "f1": 0.4}}
    (rescored_titled,), _ = rescore_rows([titled], questions, chunk_texts(live_chunks(fake_index)))
    assert rescored_titled["answer"]["keyword_recall"] in (0.0, None) and rescored_titled["answer"]["f1"] in (0.0, None)
    assert rescored_titled["answer"]["text"] == titled["answer"]["text"]

    out = tmp_path / "rescored.jsonl"
    lost = tmp_path / "lost.jsonl"
    lost.write_text(
        json.dumps(rows[2] | {"retrieval": {"sources": [rows[2]["retrieval"]["sources"][0] | {"chunk_id": "gone"}]}})
        + "\n"
    )
    assert main([str(lost), "--questions", str(questions_path), "--index", str(fake_index), "--out", str(out)]) == 2
    assert "no longer holds chunk gone" in capsys.readouterr().err and not out.exists()
    cut = rows[2] | {
        "answer": rows[2]["answer"] | {"citations": rows[2]["answer"]["citations"] | {"copied_spans": [[0, 9999, 1]]}}
    }
    lost.write_text(json.dumps(cut) + "\n")
    assert main([str(lost), "--questions", str(questions_path), "--index", str(fake_index), "--out", str(out)]) == 2
    assert "copied spans do not fit an answer" in capsys.readouterr().err and not out.exists()
    assert (
        main([str(results), "--questions", str(questions_path), "--index", str(fake_index), "--out", str(results)]) == 2
    )
    assert "write the rescored rows to a new file" in capsys.readouterr().err
    assert main([str(results), "--questions", str(questions_path), "--index", str(fake_index), "--out", str(out)]) == 0
    assert json.loads(json.dumps(load_rows(out)[0])) == rows


def test_an_answer_the_drafter_copied_into_is_rescored_with_its_live_provenance():
    from app.copilot.events import Passage
    from app.copilot.pipeline import _checked_final, _Prepared, final_from_text
    from app.copilot.tool_pages import ToolPages

    passages = [Passage(1, "Drain it: scontrol update NodeName=c042 State=DRAIN Reason=fan", "rb.md", "Nodes", "")]
    copied = "scontrol update NodeName=c042 State=DRAIN"
    answer = f"[1] Run `{copied}` now."
    start = answer.index(copied)
    ids = [ord(c) for c in answer]  # one token per character
    origins = ["target"] * start + ["passage:1"] * len(copied) + ["target"] * (len(answer) - start - len(copied))
    prepared = _Prepared("How do I drain c042?", [], [], passages, [], [], {}, pages=ToolPages())
    live = _checked_final(prepared, answer, ids, origins, "eos", {}, lambda done: "".join(map(chr, done)), {})
    assert live.citations.spans == ((start, start + len(copied), 1),) and live.citations.copied == {1: len(copied)}

    spans, tokens = [list(span) for span in live.citations.spans], dict(live.citations.copied)
    again = final_from_text("How do I drain c042?", passages, answer, "eos", copies=(spans, tokens))
    assert again.citations == live.citations and again.quotes == live.quotes
    by_text = final_from_text("How do I drain c042?", passages, answer, "eos")
    assert by_text.citations.copied == {} and by_text.citations.spans == ()  # what rescoring gave before
    with pytest.raises(ValueError, match="does not fit"):
        final_from_text("How do I drain c042?", passages, answer, "eos", copies=([[5, 500, 1]], tokens))
