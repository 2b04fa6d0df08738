"""`specrag ask` on the llama.cpp path imports no torch model machinery it does not run.

transformers' modeling_utils (accelerate, boto3, SciPy's optimizers; 128 MB resident and 3 s to
import), its masking_utils (torch._dynamo and sympy) and numba (via bm25s) were loaded by every
process, though only a torch model uses the first two and nothing here uses numba. Type hints
import them under TYPE_CHECKING; the int4 path imports them when it builds its first model.
"""

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("transformers.modeling_utils", "torch._dynamo", "sympy", "accelerate", "numba")
PROBE = f"""
import sys
import app.ask, app.cli
from app.copilot import loading, pipeline
from retrieval import retriever, query_embedder
import generation.engine, generation.llamacpp_lm, generation.models, generation.quantized_model
print(*[name for name in {HEAVY!r} if name in sys.modules])
"""


def test_the_ask_path_loads_no_torch_model_machinery():
    loaded = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []


def test_the_answering_process_reads_chunks_without_the_document_readers():
    """The process that answers (and on the int4 path holds the models) joins neighbouring chunks and finds
    written-out names in them; it had imported the splitter and every reader (LangChain, lxml, the man page
    reader: 16 MB resident) through the chunk type alone."""
    probe = """
import sys
import app.ask, app.cli
from app.copilot import conversation, loading, pipeline
from retrieval import chunking, named_terms, neighbours
readers = ("langchain_text_splitters", "lxml", "retrieval.loaders", "retrieval.man_pages")
print(*[name for name in readers if name in sys.modules])
"""
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []


def test_the_int4_path_still_registers_its_attention_when_it_builds_a_model():
    probe = """
import torch
from transformers import Qwen2Config
from generation.invariant_attention import NAME
from generation.quantized_model import quantize_module_tree
from transformers import AutoModelForCausalLM
config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=1)
model = quantize_module_tree(AutoModelForCausalLM.from_config(config), "int8")
out = model(torch.tensor([[1, 2, 3]])).logits
print(model.config._attn_implementation == NAME, tuple(out.shape))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "(1,", "3,", "64)"]


# Qwen's ChatML layout, so the prompt goes through the GGUF's own template (gguf_tokenizer.py)
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
ASK = """
import sys
from app.cli import main
status = main(sys.argv[1:])
print("HEAVY", *[name for name in ("torch", "transformers", "faiss", "bm25s", "scipy") if name in sys.modules])
sys.exit(status)
"""


@pytest.mark.parametrize("temperature", ["0", "0.7"])
def test_ask_on_llama_cpp_runs_without_torch_or_transformers(tmp_path, temperature):
    """`specrag ask` on a GGUF: tokenizer, chat template, decoding, sampling and the grounding filter run on
    llama.cpp and numpy alone (torch is ~220 MB of the peak RSS the issue caps at 1.3x the weights)."""
    from tiny_gguf import write_tiny_gguf

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", chat_template=CHATML)
    context = tmp_path / "runbook.txt"
    context.write_text("Drain a node: `scontrol update nodename=c042 state=drain reason=maint`.\n")
    argv = ["ask", "How do I drain c042?", "--context-file", str(context), "--target", str(gguf), "--draft", "none"]
    argv += ["--quant", "llamacpp-f16", "--max-new-tokens", "24", "--temperature", temperature, "--json"]
    env = {**os.environ, "SPECRAG_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-c", ASK, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    answer, heavy = run.stdout.strip().splitlines()[-2:]
    assert heavy.split() == ["HEAVY"]
    assert json.loads(answer)["stats"]["new_tokens"] > 0


def test_the_answer_checks_stem_words_without_the_index_modules():
    """`ask` searches in a child process (app/copilot/search_process.py); its answer checks stem words as
    BM25 does, and imported retrieval.index for the stemmer, mapping FAISS, bm25s and SciPy after all."""
    probe = """
import sys
from app.copilot.borrowed import borrowed_sentences
assert borrowed_sentences("Backups run nightly at 01:00 [1].", ["Drain the node."], "How do I drain a node?")
print(*[name for name in ("faiss", "bm25s", "scipy", "retrieval.index") if name in sys.modules])
"""
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
