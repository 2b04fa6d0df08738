"""The quality bar per split, from handwritten results rows."""

import json

from app.eval.bar import by_split, main
from core.errors import run_reporting_errors


def row(row_id, unanswerable=False, abstained=False, cited=(), kinds=None, keyword_recall=None, hit5=None):
    return {
        "id": row_id,
        "status": "ok",
        "unanswerable": unanswerable,
        "abstention": {"abstained": abstained},
        "retrieval": {"metrics": None if hit5 is None else {"hit@5": hit5, "mrr": hit5 / 2}},
        "answer": {
            "keyword_recall": keyword_recall,
            "citations": {"cited": list(cited)},
            "grounding": {"items": 0, "found": 0, "by_kind": kinds or {}},
        },
    }


def test_figures_are_split_by_id_hash_and_commands_are_scored_apart_from_specifics():
    rows = [
        row("q1", cited=[1], keyword_recall=1.0, hit5=1.0,
            kinds={"option": {"items": 2, "found": 1, "adapted": 1}, "phone": {"items": 1, "found": 0}}),
        row("q2", abstained=True, keyword_recall=0.0, hit5=0.0),  # an answerable question wrongly refused
        row("q4", unanswerable=True, abstained=True),
        row("q3", unanswerable=True, abstained=False, cited=[2], kinds={"code": {"items": 1, "found": 1}}),
    ]  # fmt: skip
    table = by_split(rows)  # q1, q2, q4: dev; q3: held-out
    dev, held = table["dev"], table["held-out"]
    assert dev["unanswerable_abstained"] == "1/1 (1.00)" and dev["answerable_refused"] == "1/2 (0.50)"
    assert dev["cited"] == "1/1 (1.00)" and dev["commands_grounded"] == "1/2 (0.50)" and dev["specifics_flagged"] == 1
    assert dev["commands_adapted"] == 1 and held["commands_adapted"] == 0  # q3's counts predate `adapted`
    assert dev["keyword_recall"] == 0.5 and dev["hit@5"] == 0.5 and dev["mrr"] == 0.25
    assert held["unanswerable_abstained"] == "0/1 (0.00)" and held["commands_grounded"] == "1/1 (1.00)"
    assert table["all"]["questions"] == 4


def test_rows_without_per_kind_counts_score_all_items_as_commands():
    old = row("q1", cited=[1])
    old["answer"]["grounding"] = {"items": 3, "found": 2}
    assert by_split([old])["dev"]["commands_grounded"] == "2/3 (0.67)"


def test_cited_sources_that_hold_their_items_are_counted_where_rows_record_them():
    right, wrong, old = row("q1", cited=[1]), row("q2", cited=[2]), row("q4", cited=[1])
    right["answer"]["grounding"] |= {"attributed": 3, "misattributed": ["MaxJobs"]}
    wrong["answer"]["grounding"] |= {"attributed": 1, "misattributed": ["--begin"]}
    dev = by_split([right, wrong, old])["dev"]  # q4 predates the check: it adds nothing
    assert dev["cited_source_holds"] == "2/4 (0.50)"
    assert by_split([old])["dev"]["cited_source_holds"] == "0/0"


def test_corrected_citations_are_counted_where_rows_record_them():
    moved, old = row("q1", cited=[2]), row("q2", cited=[1])
    recited = [[[5], 2, "The node is currently executing a job"], [[1], 3, "sinfo -R"]]
    moved["answer"]["grounding"] |= {"recited": recited}
    assert by_split([moved, old])["dev"]["citations_corrected"] == 2  # q2 predates recitation: it adds nothing
    assert by_split([old])["dev"]["citations_corrected"] == 0


def test_answers_shown_with_definitions_are_counted_where_rows_record_them():
    defined, bare, old = row("q1", cited=[1]), row("q2", cited=[1]), row("q4", cited=[1])
    defined["answer"]["definitions"] = [["--time-min", 1, "Set a minimum time limit on the job allocation."]]
    bare["answer"]["definitions"] = []
    assert by_split([defined, bare, old])["dev"]["answers_with_definitions"] == "1/2 (0.50)"  # q4 predates them
    assert by_split([old])["dev"]["answers_with_definitions"] is None


def test_answers_quoting_an_unnamed_entry_are_counted():
    neighbour, bare, old = row("q1", cited=[1]), row("q2", cited=[1]), row("q4", cited=[1])
    neighbour["answer"]["neighbour_quotes"] = [["FAILING", 4, "The node is currently executing a job, but is expected"]]
    bare["answer"]["neighbour_quotes"] = []
    assert by_split([neighbour, bare, old])["dev"]["neighbour_quotes"] == 1


def test_answers_with_a_spliced_sentence_are_counted():
    spliced, bare, old = row("q1", cited=[1]), row("q2", cited=[1]), row("q4", cited=[1])
    spliced["answer"]["spliced"] = [[1, "One node failing the probe", "a site-wide problem"]]
    bare["answer"]["spliced"] = []
    assert by_split([spliced, bare, old])["dev"]["spliced"] == 1


def test_assembled_commands_are_counted_where_rows_record_them():
    new = row("q1", cited=[1], kinds={"code": {"items": 2, "found": 2}})
    new["answer"]["grounding"]["assembled"] = [["sdiag backfill", [1]]]
    old = row("q4", cited=[1], kinds={"code": {"items": 1, "found": 1}})  # written before session 23
    assert by_split([new, old])["dev"]["commands_assembled"] == 1


def test_answers_telling_a_sources_sentence_of_another_setting_are_counted():
    swapped, bare, old = row("q1", cited=[1]), row("q2", cited=[1]), row("q4", cited=[1])
    swapped["answer"]["swapped"] = [["KillWait", "OverTimeLimit", 1, "configuration parameter may permit the job"]]
    bare["answer"]["swapped"] = []
    assert by_split([swapped, bare, old])["dev"]["swapped"] == 1


def test_the_bar_reads_a_run_directory_and_skips_a_torn_last_line_without_touching_it(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    results = run / "results.jsonl"
    whole = json.dumps(row("q1", cited=[1], keyword_recall=1.0, hit5=1.0))
    torn = '{"id": "q2", "answer": {"text": "half wri'  # what a run killed mid-write leaves
    results.write_text(whole + "\n" + torn)
    assert main([str(run)]) == 0
    assert "| all | 1 |" in capsys.readouterr().out
    assert results.read_text().endswith(torn)  # a reader never repairs the file of a run that may resume
    assert main([str(results), str(run)]) == 0  # the file itself works too; rows of each path are pooled
    assert "| all | 2 |" in capsys.readouterr().out


def test_a_missing_run_is_one_line_that_says_what_to_give(tmp_path, capsys):
    assert run_reporting_errors("python -m app.eval.bar", lambda: main([str(tmp_path)])) == 2
    assert "holds no results.jsonl: give the directory an eval wrote (--out)" in capsys.readouterr().err
    assert run_reporting_errors("python -m app.eval.bar", lambda: main([str(tmp_path / "nope.jsonl")])) == 2
    assert "nope.jsonl does not exist" in capsys.readouterr().err
