"""Every test runs with its own specrag cache and home, never the user's."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # copilot_fakes (tests run with --import-mode=importlib)


@pytest.fixture(autouse=True, scope="session")
def isolated_specrag_dirs(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("specrag")
    # slow tests load the real default models from the user's cache, not the isolated one
    patch.setenv("SPECRAG_REAL_HOME", os.environ.get("SPECRAG_HOME", str(Path.home() / ".cache" / "specrag")))
    patch.setenv("SPECRAG_HOME", str(root / "home"))
    patch.setenv("HF_HUB_OFFLINE", "1")
    yield root
    patch.undo()


@pytest.fixture(autouse=True)
def uncited_answers_shown(request, monkeypatch):
    """The tiny random models never write a [n], so the copilot would withhold every answer they give
    (app/copilot/withhold.py, CitationGuard). Tests of everything else see their answers; tests marked
    `withholds_uncited` keep the rule."""
    if request.node.get_closest_marker("withholds_uncited"):
        return
    from app.copilot import pipeline
    from app.copilot.withhold import CitationGuard

    monkeypatch.setattr(pipeline, "CitationGuard", lambda numbers, texts=None: CitationGuard([]))


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """Measurements are kept whatever else the machine runs, so no test depends on its load (a calibration
    left unkept ran again inside a test that counted passes); the tests of that rule set their own load."""
    from machine_fakes import FakeLoad

    from generation import calibration

    monkeypatch.setattr(calibration, "OtherLoad", FakeLoad)
