"""llamacpp-plain's start on a machine where llama.cpp's default weight buffers crash (AMX, llama.cpp#20824)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "generation"))
from tiny_gguf import write_tiny_gguf

from app.bench_llamacpp import PROBE, default_buffers_run, without_extra_buffers

SEGFAULT = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "target.gguf")


def test_a_probe_that_segfaults_in_its_child_says_the_default_buffers_do_not_run(gguf):
    assert default_buffers_run(gguf, 1, probe=SEGFAULT) is False  # and this process lives on to say so
    assert default_buffers_run(gguf, 1, probe="raise SystemExit(3)") is False
    assert default_buffers_run(gguf, 1, probe="import sys; assert sys.argv[2] == '1'") is True


def test_the_real_probe_fails_on_a_model_llama_cpp_cannot_load(tmp_path):
    assert default_buffers_run(tmp_path / "missing.gguf", 1) is False  # a load that fails is no pass either
    assert "llm.eval(llm.tokenize(" in PROBE  # it runs a batch of several tokens, where AMX crashed


def test_within_the_switch_a_new_llama_loads_without_extra_buffers_and_after_it_with_them(gguf):
    from llama_cpp import Llama
    from llama_cpp import llama_cpp as bindings

    assert bindings.llama_model_default_params().use_extra_bufts is True
    with without_extra_buffers():
        assert bindings.llama_model_default_params().use_extra_bufts is False
        llm = Llama(model_path=str(gguf), n_ctx=64, n_threads=1, verbose=False)
        assert llm.model_params.use_extra_bufts is False
    assert bindings.llama_model_default_params().use_extra_bufts is True
    # on a Sapphire Rapids Xeon this batch segfaulted with the default buffers (this tiny Q4_K model too)
    llm.eval(llm.tokenize(b"several tokens in one batch"))
    assert llm.n_tokens > 1
