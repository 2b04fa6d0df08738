"""Commands report a SpecragError as one line and an exit code, never a traceback."""

import subprocess
import sys

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
