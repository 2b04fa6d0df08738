"""Opening an index does not load numba (bm25s would, for a backend specrag never calls)."""

import importlib.util
import subprocess
import sys

import pytest

PROBE = """
import sys
import retrieval.index as index
scores = index.bm25s.BM25()
scores.index(index.bm25_tokens(["drain a node with scontrol", "the job array throttle"]), show_progress=False)
top = scores.get_scores(index.bm25_tokens(["drain node"])[0])
print("numba" in sys.modules, "bm25s" in sys.modules, int(top.argmax()), float(top[1]))
"""


def test_the_index_module_loads_bm25s_without_numba_and_scores_the_same():
    if importlib.util.find_spec("numba") is None:
        pytest.fail("numba is not installed: ranx, a dependency, installs it; this test checks it stays unloaded")
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    assert out[:4] == ["False", "True", "0", "0.0"]  # no numba; the drain chunk ranks first, the other scores 0


def test_a_process_that_already_loaded_numba_keeps_it_for_bm25s():
    probe = "import numba\n" + PROBE
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out[:4] == ["True", "True", "0", "0.0"]
