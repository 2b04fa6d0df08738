"""The gate calibration tool: a threshold fitted on dev, or a given one reported on new questions."""

import json

from copilot_fakes import FakeRetriever

from app.copilot import Copilot
from app.copilot.gate_calibration import main


def write_questions(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def run(monkeypatch, capsys, similarity, argv):
    retriever = FakeRetriever([("a.md", "drain a node with scontrol")], similarity=similarity)
    monkeypatch.setattr(Copilot, "retrieval_only", classmethod(lambda cls, options=None: cls(None, options, retriever)))
    assert main(argv) == 0
    out = capsys.readouterr().out
    return json.loads(out[: out.index("\n}") + 2])


def test_a_given_threshold_reports_how_the_gate_treats_new_questions(tmp_path, monkeypatch, capsys):
    questions = tmp_path / "fresh.jsonl"
    write_questions(questions, [{"id": f"q{i}", "question": f"question {i}?", "gold": ["a.md"]} for i in range(8)])
    given = run(monkeypatch, capsys, 0.45, [str(questions), "--threshold", "0.49"])
    for split in ("dev", "held_out"):
        assert given[split]["threshold"] == 0.49 and given[split]["answerable_refused"] == 1.0
    assert given["dev"]["answerable"] + given["held_out"]["answerable"] == 8
    # without one, the dev split's own threshold: with no unanswerable question, the lowest, refusing none
    fitted = run(monkeypatch, capsys, 0.45, [str(questions)])
    assert fitted["dev"]["threshold"] == 0.0 and fitted["dev"]["answerable_refused"] == 0.0
