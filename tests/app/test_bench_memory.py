"""app/bench_memory.py counts every process of the command's tree, not only the largest one."""

import sys

from app.bench_memory import main, sample_tree

HOLD = "import time; block = bytearray({mb} * 2**20); block[::4096] = b'x' * len(block[::4096]); time.sleep(1.0)"


def test_the_peak_adds_up_a_child_that_runs_beside_its_parent():
    parent = (
        "import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', {child!r}]); "
        + HOLD.format(mb=150)
        + "; child.wait()"
    ).format(child=HOLD.format(mb=250))
    peak = sample_tree([sys.executable, "-c", parent])
    mib = 2**20
    assert peak.returncode == 0 and peak.samples > 5
    assert 150 * mib < peak.top_bytes < 250 * mib  # the parent alone
    assert peak.tree_bytes > 400 * mib  # both at once


def test_the_report_compares_with_the_weights_and_passes_the_exit_status_on(tmp_path, capsys):
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"\0" * 2**20)
    status = main(["--weights", str(weights), "--", sys.executable, "-c", "import sys; sys.exit(3)"])
    err = capsys.readouterr().err
    assert status == 3 and "of w.gguf (1 MiB)" in err and "exit status 3" in err
    assert main(["--weights", str(tmp_path / "none.gguf"), "--", "true"]) == 2
    assert "pass --weights FILE" in capsys.readouterr().err
