"""Test helpers for `specrag eval`: tiny models, a fake-embedder index of the fixture docs, a copilot factory.

Also a script: `python tests/eval/evalkit.py INDEX_DIR EVAL-ARGS...` runs `specrag eval` in a child process
with these helpers and a delay per question, for the kill-and-resume test.
"""

import sys
import time
from pathlib import Path

TESTS = Path(__file__).parents[1]
sys.path.insert(0, str(TESTS.parent))
sys.path.insert(0, str(TESTS / "generation"))
sys.path.insert(0, str(TESTS / "retrieval"))

from retrieval_fakes import FakeEmbedder  # noqa: E402

from app.copilot import Copilot, CopilotOptions, LoadedEngine  # noqa: E402
from generation.engine import Engine  # noqa: E402
from tiny import byte_tokenizer, tiny_target_and_draft  # noqa: E402

FIXTURE_DOCS = TESTS / "retrieval" / "fixtures" / "docs"


def tiny_loaded() -> LoadedEngine:
    target, draft = tiny_target_and_draft()
    return LoadedEngine(Engine(target, byte_tokenizer(), draft), "/models/tiny-target", "/models/tiny-draft")


def build_index(index_dir: Path) -> None:
    from retrieval.ingest import ingest

    ingest([FIXTURE_DOCS], index_dir, embedder=FakeEmbedder())


def factory(index_dir: Path, loaded: LoadedEngine | None, delay_s: float = 0.0):
    """A copilot_factory for app.eval_cmd.run: tiny models (unless retrieval only) over the fake index."""
    from retrieval.retriever import open_index

    def make(options: CopilotOptions, retrieval_only: bool) -> Copilot:
        retriever = open_index(index_dir, embedder=FakeEmbedder())
        if delay_s:
            retriever = SlowRetriever(retriever, delay_s)
        return Copilot(None if retrieval_only else loaded, options, retriever)

    return make


class SlowRetriever:
    def __init__(self, inner, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s

    def retrieve(self, query: str, k: int):
        time.sleep(self.delay_s)
        return self.inner.retrieve(query, k)


def main(argv: list[str]) -> int:
    from app.cli import build_parser
    from app.eval_cmd import run

    index_dir, eval_argv = Path(argv[0]), argv[1:]
    return run(build_parser().parse_args(["eval", *eval_argv]), factory(index_dir, tiny_loaded(), delay_s=0.3))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
