"""Commands report a SpecragError as one line and an exit code, never a traceback."""

import subprocess
import sys

import pytest

from core.errors import SpecragError, run_reporting_errors


def test_a_specrag_error_becomes_one_line_and_exit_code_2(capsys):
    def fails():
        raise SpecragError("no index at /x; build one with: specrag ingest")

    assert run_reporting_errors("prog", fails) == 2
    assert capsys.readouterr().err == "prog: error: no index at /x; build one with: specrag ingest\n"
    assert run_reporting_errors("prog", lambda: None) == 0


def test_a_bench_script_on_a_missing_index_says_what_to_do(tmp_path):
    env = {"SPECRAG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "app.bench_conversation", "--index", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "specrag ingest" in result.stderr


def test_an_unforeseen_os_error_becomes_one_line_naming_the_file_and_exit_code_1(tmp_path, capsys):
    full = tmp_path / "results.jsonl"

    def disk_full():
        raise OSError(28, "No space left on device", str(full))

    assert run_reporting_errors("prog", disk_full) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"prog: error: No space left on device: {full}; check the path") and err.count("\n") == 1


def test_a_results_path_is_checked_before_any_work(tmp_path):
    from core.output_paths import output_dir, output_file

    assert output_file(tmp_path / "new" / "b.json") == tmp_path / "new" / "b.json"
    assert (tmp_path / "new").is_dir() and not list((tmp_path / "new").iterdir())  # the write check left nothing
    with pytest.raises(SpecragError, match=r"is a folder; give a file name for the results, e.g. .*bench\.json"):
        output_file(tmp_path, "bench.json")
    (tmp_path / "plain").write_text("x")
    with pytest.raises(SpecragError, match=r"cannot write .*choose a path you can write to"):
        output_file(tmp_path / "plain" / "b.json")  # its folder would have to be a file
    with pytest.raises(SpecragError, match="is a file, not a folder"):
        output_dir(tmp_path / "plain")
    assert output_dir(tmp_path / "run") == tmp_path / "run" and (tmp_path / "run").is_dir()
