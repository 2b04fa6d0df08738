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


def test_judge_threshold_is_the_middle_of_the_best_gap_between_dev_scores():
    from app.copilot.gate_calibration import calibrate_judge, rates

    def row(answerable, judged, similarity=0.3):
        return {"answerable": answerable, "similarity": similarity, "judged": judged}

    dev = [row(False, j) for j in (-1.0, 0.2, 0.39)] + [row(True, j) for j in (0.07, 0.77, 1.0)]
    dev += [row(True, None, 0.8), row(False, None, 0.6)]  # above the cosine threshold: never judged
    threshold = calibrate_judge(dev, 0.49)
    assert threshold == (0.39 + 0.77) / 2
    assert rates(dev, 0.49, threshold)["answerable_refused"] == 0.25  # 0.07 stays refused; the rescue keeps
    assert rates(dev, 0.49, threshold)["unanswerable_refused"] == 0.75  # every unanswerable one cosine refused
    # 0.5 (refusing the answerable 0.0) and 1.5 (letting the answerable 2.0 through) tie: the higher wins,
    # as the judge then lets fewer questions through
    tied = [row(True, 0.0), row(False, 1.0), row(True, 2.0)]
    assert calibrate_judge(tied, 0.49) == 1.5 and calibrate_judge([row(True, None, 0.9)], 0.49) is None


def test_judge_calibration_runs_the_models_on_questions_below_the_threshold(tmp_path, monkeypatch, capsys, tiny_engine):
    questions = tmp_path / "q.jsonl"
    rows = [{"id": f"q{i}", "question": f"drain node {i}?", "gold": ["a.md"] if i % 3 else []} for i in range(9)]
    write_questions(questions, rows)
    retriever = FakeRetriever([("a.md", "drain a node with scontrol")], similarity=0.3)
    monkeypatch.setattr(Copilot, "retrieval_only", classmethod(lambda cls, options=None: cls(None, options, retriever)))
    assert main([str(questions), "--threshold", "0.49", "--judge"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    report = json.loads(out[: out.index("\n}") + 2])
    assert report["target"] == "default-target" and isinstance(report["dev"]["judge_threshold"], float)
    assert report["dev"]["answerable"] + report["held_out"]["answerable"] == 6
    listed = out[out.index("\n}") + 2 :].strip().splitlines()
    assert len(listed) == 9 and all(" judge " in line for line in listed)  # every row was below 0.49
    assert captured.err.count("judged ") == 9


def test_a_veto_judges_what_cosine_lets_through_and_refuses_below_it(tmp_path, monkeypatch, capsys, tiny_engine):
    questions = tmp_path / "q.jsonl"
    write_questions(questions, [{"id": f"q{i}", "question": f"drain node {i}?", "gold": ["a.md"]} for i in range(4)])
    retriever = FakeRetriever([("a.md", "drain a node with scontrol")], similarity=0.9)  # cosine lets all through
    monkeypatch.setattr(Copilot, "retrieval_only", classmethod(lambda cls, options=None: cls(None, options, retriever)))
    reports = []
    for veto in ("-1e9", "1e9"):
        assert main([str(questions), "--threshold", "0.49", "--judge", f"--veto={veto}"]) == 0
        out = capsys.readouterr().out
        reports.append(json.loads(out[: out.index("\n}") + 2]))
    assert [r["dev"]["veto"] for r in reports] == [-1e9, 1e9]
    assert [r["dev"]["answerable_refused"] + r["held_out"]["answerable_refused"] for r in reports] == [0.0, 2.0]
    assert main([str(questions), "--judge"]) == 0 and "veto" not in capsys.readouterr().out  # no veto asked
