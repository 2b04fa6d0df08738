"""`specrag chat` as a subprocess on the hand-wired tiny model and a fixture index, for browser and load tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from chat_process import ROOT, running_chat
from tiny_chat import save_chat_model, write_fixture_docs

EVENT_DELAY = 0.1  # seconds after each streamed event: a slow model, so streaming and stop are observable


def build_fixture_index(tmp: Path) -> Path:
    """The fixture docs indexed with the packaged MiniLM (the embedder the server loads too)."""
    from retrieval.ingest import ingest

    index = tmp / "index"
    report = ingest([write_fixture_docs(tmp / "docs")], index)
    assert report.chunks >= 3
    return index


FLAT_COSTS = """
import json, sys
from pathlib import Path
from app.copilot import ModelOptions, loading
from generation.calibration import SIZES, setup_key
from generation.engine import calibration_extra

model, home = sys.argv[1], Path(sys.argv[2])
engine = loading.load_engine(ModelOptions(target=model, draft=model)).engine
key = setup_key(engine.target, calibration_extra(engine.target.model))
home.mkdir(parents=True, exist_ok=True)
(home / "calibration.json").write_text(json.dumps({key: dict.fromkeys(map(str, SIZES), 1.0)}))
"""


def flat_pass_costs(model: Path, home: Path) -> None:
    """Calibrate the server's tiny target with a flat pass-cost curve, so its drafting policy drafts.

    Measured at the server's start instead, the curve followed the machine's load: with other
    jobs on both cores the policy once drafted nothing, and the chat showed no provenance mark.
    The curve's key is computed in a fresh interpreter, as the server's is: in this one the
    generation tests' conftest has set torch to one thread, and a key made here with it named
    another setup, so the server measured its own curve after all (and under load drafted nothing)."""
    subprocess.run([sys.executable, "-c", FLAT_COSTS, str(model), str(home)], cwd=ROOT, check=True)


@pytest.fixture(scope="session")
def chat_server(tmp_path_factory):
    """A running `specrag chat` on the tiny model: yields (url, feedback_db, tmp dir)."""
    tmp = tmp_path_factory.mktemp("chat")
    model = save_chat_model(tmp / "tiny-chat-model")
    flat_pass_costs(model, tmp / "home")  # running_chat's SPECRAG_HOME
    index = build_fixture_index(tmp)
    feedback = tmp / "feedback.db"
    args = [
        "--index", str(index), "--target", str(model), "--draft", str(model), "--max-new-tokens", "96",
        "--passages", "3", "--feedback-db", str(feedback), "--event-delay", str(EVENT_DELAY),
        "--gate", "off",  # these tests drive the UI; the gate has its own tests (tests/app/test_copilot.py)
        "--repeat-span", "0",  # the tiny model loops; the stop test needs a long answer
    ]  # fmt: skip
    with running_chat(tmp, *args) as url:
        yield url, feedback, tmp
