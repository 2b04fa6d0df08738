"""`ask`'s search in a child process (app/copilot/search_process.py): the same passages as a search here,
the child's errors as the user would see them, and none of the retrieval stack's imports in the parent.

The child is spawned: it inherits no monkeypatch, so these tests search a real index built with the
packaged MiniLM, the model a reader loads for an index that names it (retrieval.retriever.trusted_embedder).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.copilot import Copilot, CopilotOptions
from app.copilot.search_process import SearchProcess, SearchProcessError, _portable, search_apart
from app.copilot.tool_pages import ToolPages
from core.errors import SpecragError

DOCS = {
    "drain.md": "# Draining nodes\n\n## Drain\n\nTo drain a node run scontrol update nodename=NODE state=drain "
    "reason=maintenance and wait for the jobs to finish.\n",
    "munge.md": "# Munge\n\n## Keys\n\nMunge keys live in /etc/munge/munge.key and must be identical on every "
    "node. Restart munge after you copy the key.\n",
    "resume.md": "# Resuming nodes\n\n## Resume\n\nResume a drained node with scontrol update nodename=NODE "
    "state=resume once sinfo -R shows no reason.\n",
    "scontrol.md": "# scontrol\n\n## COMMANDS\n\n- show <ENTITY>\n- Display the state of an entity.\n"
    "- update <SPECIFICATION>\n- Update job, step, node or partition state.\n",
}
QUESTION = "How do I drain a node?"
# the commands scontrol.md lists, and the words its pages write after `scontrol` (subcommands.tool_commands)
SCONTROL_COMMANDS = frozenset({"show", "update"})
HEAVY = ("torch", "transformers", "faiss", "bm25s", "scipy", "retrieval.query_embedder", "retrieval.index")
PROBE = f"""
import json, sys
from pathlib import Path
from app.copilot import CopilotOptions
from app.copilot.search_process import search_apart
passages, model = search_apart(CopilotOptions(index_dir=Path(sys.argv[1])), {QUESTION!r}, 2)
print(json.dumps({{"passages": [p.to_dict() for p in passages], "model": model,
                  "imported": [name for name in {HEAVY!r} if name in sys.modules]}}))
"""


@pytest.fixture(scope="module")
def minilm_index(tmp_path_factory) -> Path:
    from retrieval.ingest import ingest

    tmp = tmp_path_factory.mktemp("search-process")
    (tmp / "docs").mkdir()
    for name, text in DOCS.items():
        (tmp / "docs" / name).write_text(text, encoding="utf-8")
    ingest([tmp / "docs"], tmp / "index")
    return tmp / "index"


@pytest.fixture(scope="module")
def searched_here(minilm_index) -> tuple[list, str | None]:
    """The top 2 passages for QUESTION and the index's model, as a search in this process finds them."""
    copilot = Copilot.retrieval_only(CopilotOptions(index_dir=minilm_index))
    return copilot.retrieve_for(QUESTION, (), 2)[0], copilot.embedding_model


def test_the_child_sends_what_the_index_tool_pages_say(minilm_index):
    here = Copilot.retrieval_only(CopilotOptions(index_dir=minilm_index))
    assert here.tool_pages() == ToolPages()  # the index is not open yet
    here.retrieve_for(QUESTION, (), 2)
    assert {"show", "update"} <= here.tool_pages().commands["scontrol"]
    with SearchProcess(CopilotOptions(index_dir=minilm_index), QUESTION, 2) as search:
        search.result()
    assert search.pages == here.tool_pages()


def test_the_child_finds_the_passages_a_search_here_finds_and_its_parent_imports_no_retrieval_stack(
    minilm_index, searched_here
):
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(minilm_index)], capture_output=True, text=True, check=True
    )  # a fresh parent: this test process has imported everything already
    found = json.loads(probe.stdout)
    assert found["imported"] == []
    passages, model = searched_here
    assert found["passages"] == [p.to_dict() for p in passages] and found["model"] == model
    assert passages[0].source.endswith("drain.md") and model == "sentence-transformers/all-MiniLM-L6-v2"


def test_ask_answers_from_the_passages_its_search_process_found(
    tiny_engine, capsys, minilm_index, searched_here, monkeypatch
):
    import retrieval.live

    expected, model = searched_here
    loads, answered_from = [], []
    real_load, real_fit = Copilot.load, Copilot.fit_context

    def load(options=None, **kwargs):  # records whether a search child still runs as the models load
        import multiprocessing

        loads.append((kwargs, [child.name for child in multiprocessing.active_children()]))
        return real_load(options, **kwargs)

    def fit_context(self, question, passages, options=None):  # what ask answers from, and what the gate reads
        answered_from.append((list(passages), self.embedding_model, self.tool_pages().commands))
        return real_fit(self, question, passages, options)

    def no_index_here(*args, **kwargs):
        raise AssertionError("the index was opened in the answering process")

    monkeypatch.setattr(Copilot, "load", load)
    monkeypatch.setattr(Copilot, "fit_context", fit_context)
    monkeypatch.setattr(retrieval.live, "LiveRetriever", no_index_here)  # the spawned child keeps the real one
    assert main(["ask", QUESTION, "--index", str(minilm_index), "--passages", "2", "--max-new-tokens", "4"]) == 0
    err = capsys.readouterr().err
    # no index opened here, and the models loaded once the child had exited (llama.cpp pages its GGUF in as it
    # loads: beside the child's torch and index, the two processes held 1.7 GB against 1.33 GB one after the other)
    assert loads == [({}, [])] and answered_from == [(expected, model, {"scontrol": SCONTROL_COMMANDS})]
    assert err.startswith("specrag: searching the sources…\n")
    assert "specrag:   [1] Draining nodes › Drain\n" in err


def test_an_error_of_the_search_reaches_the_parent_with_its_message(tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1] / "retrieval"))
    from retrieval_fakes import FakeEmbedder

    from retrieval.errors import IndexMismatchError
    from retrieval.ingest import ingest

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "drain.md").write_text(DOCS["drain.md"], encoding="utf-8")
    ingest([tmp_path / "docs"], tmp_path / "index", embedder=FakeEmbedder())  # a model readers do not trust
    with pytest.raises(IndexMismatchError, match="built with the embedding model fake-model; pass --model"):
        search_apart(CopilotOptions(index_dir=tmp_path / "index"), QUESTION, 2)


def test_a_missing_index_is_reported_at_once_without_a_child(monkeypatch, tmp_path):
    import multiprocessing

    from retrieval.errors import IndexNotFoundError

    monkeypatch.setattr(multiprocessing, "get_context", lambda method: pytest.fail("a child was started"))
    with pytest.raises(IndexNotFoundError, match="specrag ingest"):
        search_apart(CopilotOptions(index_dir=tmp_path / "nowhere"), QUESTION, 2)


def test_a_killed_search_process_is_a_clear_error(minilm_index):
    with SearchProcess(CopilotOptions(index_dir=minilm_index), QUESTION, 2) as search:
        os.kill(search.pid, signal.SIGKILL)
        with pytest.raises(SearchProcessError, match=r"the search process died \(killed by SIGKILL\)"):
            search.result()


class Located(SpecragError):
    """An error whose constructor takes more than its message: it does not unpickle."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")


def test_an_error_that_would_not_unpickle_is_sent_as_a_specrag_error_with_its_message():
    sent = _portable(Located("/index", "damaged"))
    assert type(sent) is SpecragError and str(sent) == "/index: damaged"
    kept = _portable(SearchProcessError("as it is"))
    assert type(kept) is SearchProcessError
