"""Other work on the CPU during a measurement is seen, and such a measurement is never cached."""

import json
import subprocess
import sys
import time

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


def test_pass_costs_measured_under_other_work_serve_busy_starts_until_a_quiet_start_measures_again(
    target, tmp_path, monkeypatch, caplog
):
    lm, path, measured = CachedLM(target), tmp_path / "calibration.json", []
    real = calibration.measure_relative_costs
    monkeypatch.setattr(calibration, "measure_relative_costs", lambda *a, **k: measured.append(1) or real(*a, **k))
    monkeypatch.setattr(calibration, "BUSY_PROBE_SECONDS", 0.01)
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(1.0))
    costs = calibration.cached_relative_costs(lm, path)
    assert costs[1] == 1.0 and len(measured) == 1 and "until a start on a quiet machine" in caplog.text
    table = json.loads(path.read_text())
    assert list(table) == [calibration.UNDER_LOAD] and len(table[calibration.UNDER_LOAD]) == 1
    assert calibration.cached_relative_costs(lm, path) == costs and len(measured) == 1  # still busy: not again
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(0.0))
    assert calibration.cached_relative_costs(lm, path)[1] == 1.0 and len(measured) == 2  # quiet: measured again
    table = json.loads(path.read_text())
    assert len(table) == 2 and table[calibration.UNDER_LOAD] == {}  # kept for good, the disturbed one dropped
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(1.0))
    calibration.cached_relative_costs(lm, path)
    assert len(measured) == 2  # a kept measurement is never taken again, busy or not


def test_a_quiet_measurement_keeps_entries_another_process_wrote_meanwhile(tmp_path):
    path = tmp_path / "calibration.json"

    def measure_while_another_process_writes():
        path.write_text(json.dumps({"other": 1}))
        return 2

    assert calibration.measured_once(path, "mine", measure_while_another_process_writes, "x") == (2, True)
    assert json.loads(path.read_text()) == {"other": 1, "mine": 2}


def test_the_busy_probe_is_busy_above_the_other_work_a_measurement_tolerates(monkeypatch):
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(1.0))
    assert calibration.machine_busy(0.01)
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(0.1))
    assert not calibration.machine_busy(0.01)


def test_an_entry_under_load_edited_into_another_shape_is_measured_again_and_replaced(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({calibration.UNDER_LOAD: ["not", "a", "table"], "other": 1}))
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(1.0))
    assert calibration.measured_once(path, "mine", lambda: 2, "x") == (2, False)
    assert json.loads(path.read_text()) == {calibration.UNDER_LOAD: {"mine": 2}, "other": 1}
