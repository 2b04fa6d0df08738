"""results.jsonl: rows appended durably, a torn last line repaired, finished ids never written twice."""

import json

import pytest

from app.eval.results import ResultsFile, load_rows
from core.errors import SpecragError


def test_rows_are_appended_one_line_each_and_read_back(tmp_path):
    path = tmp_path / "out" / "results.jsonl"
    results = ResultsFile(path).open(resume=False)
    results.append({"id": "a", "value": 1})
    results.append({"id": "b", "value": 2})
    results.append({"id": "a", "value": 3})  # already finished: not written again
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "b"]
    assert ResultsFile(path).open(resume=True).finished == {"a", "b"}


def test_a_fresh_run_refuses_to_overwrite_results(tmp_path):
    path = tmp_path / "results.jsonl"
    ResultsFile(path).open(resume=False).append({"id": "a"})
    with pytest.raises(SpecragError, match="--resume"):
        ResultsFile(path).open(resume=False)


def test_a_torn_last_line_is_cut_off_and_appends_start_clean(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "answer": {"text": "half wri')
    results = ResultsFile(path).open(resume=True)
    assert results.finished == {"a", "b"} and results.repaired > 0
    results.append({"id": "c"})
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "b", "c"]


def test_a_whole_last_row_missing_only_its_newline_is_kept(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}')
    results = ResultsFile(path).open(resume=True)
    assert results.finished == {"a", "b"} and results.repaired == 0
    results.append({"id": "c"})
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n{"id": "c"}\n'


def test_garbage_and_duplicate_lines_are_ignored_on_reading(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a", "n": 1}\nnot json\n{"no_id": 1}\n{"id": "a", "n": 2}\n')
    rows, torn = load_rows(path)
    assert rows == [{"id": "a", "n": 1}] and torn == 0
