"""Other work on the CPU during a measurement is seen, and such a measurement is never cached."""

import json
import subprocess
import sys
import time

import pytest
from machine_fakes import FakeLoad

from generation import calibration, contention
from generation.cached_lm import CachedLM


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_this_process_own_work_is_not_other_load():
    with contention.OtherLoad() as load:
        spin(0.5)
    assert load.other_cores < 0.5  # a core of its own work, counted as other, would read ~1.0


def test_another_process_spinning_during_the_measurement_is_other_load():
    busy_loop = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"
    spinner = subprocess.Popen([sys.executable, "-c", busy_loop])
    try:
        time.sleep(0.3)  # let it start
        with contention.OtherLoad() as load:
            time.sleep(1.0)
    finally:
        spinner.kill()
        spinner.wait()
    assert load.disturbed and load.other_cores > 0.5


def test_pass_costs_measured_under_other_work_are_used_but_not_kept(target, tmp_path, monkeypatch, caplog):
    lm, path = CachedLM(target), tmp_path / "calibration.json"
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(1.0))
    costs = calibration.cached_relative_costs(lm, path)
    assert costs[1] == 1.0 and not path.exists()  # used for this start, measured again at the next
    assert "measured again at the next start" in caplog.text
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(0.0))
    calibration.cached_relative_costs(lm, path)
    assert len(json.loads(path.read_text())) == 1
    monkeypatch.setattr(calibration, "measure_relative_costs", lambda *a, **k: pytest.fail("remeasured"))
    assert calibration.cached_relative_costs(lm, path)[1] == 1.0
