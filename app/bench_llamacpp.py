"""`llamacpp-plain` for `specrag bench`: llama.cpp's plain decoding of the same target GGUF.

The yardstick a CPU user would reach for instead of specrag (llama-cpp-python, the `bench`
extra, a ~10 min source build on 2 cores). It runs in the bench's process with the bench's
thread count, on the token ids our tokenizer made (the GGUF carries the same vocabulary),
from an empty KV cache for every answer, so its time to first token includes its own
prefill. It is another numeric model (Q4_K_M through llama.cpp's kernels), so its answers
are not expected to equal ours token for token.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from app.bench_report import run_record
from core.errors import SpecragError

CONTEXT = 8192  # KV positions llama.cpp reserves; Spec-Bench RAG prompts are ~1-3k tokens
# llama.cpp as a user starts it, fed one batch of several tokens: the probe run in a child process
PROBE = """import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=int(sys.argv[2]), verbose=False)
llm.eval(llm.tokenize(b"one batch of several tokens, as every prompt is"))
"""


class LlamaCppPlain:
    def __init__(self, gguf: Path, threads: int, eos: set[int], seed: int = 0, context: int = CONTEXT) -> None:
        check_available(gguf)
        self.context, self.eos = context, eos
        self.extra_buffers = default_buffers_run(gguf, threads)
        if not self.extra_buffers:
            print(
                "specrag bench: llama.cpp crashes on this machine with its default weight buffers (AMX repacking, "
                "ggml-org/llama.cpp#20824): llamacpp-plain runs without them, on its plain CPU kernels",
                file=sys.stderr,
                flush=True,
            )
        self.llm = open_llama(gguf, threads, context, self.extra_buffers, seed=seed)

    def run(self, prompt_ids: list[int], config: Any) -> dict:
        """One answer; decode_s = new tokens x llama.cpp's mean step after its first token."""
        if len(prompt_ids) + config.max_new_tokens > self.context:
            raise SpecragError(
                f"a {len(prompt_ids)}-token prompt plus {config.max_new_tokens} new tokens exceeds llamacpp-plain's "
                f"{self.context}-token context; lower --max-new-tokens or leave llamacpp-plain out"
            )
        self.llm.reset()  # forget the previous prompt: every answer pays its own prefill
        tokens: list[int] = []
        start = time.perf_counter()
        first = last = start
        for token in self.llm.generate(prompt_ids, reset=True, **sampler_kwargs(config)):
            last = time.perf_counter()
            if not tokens:
                first = last
            tokens.append(int(token))
            if token in self.eos or len(tokens) >= config.max_new_tokens:
                break  # before generate evaluates this token: plain decoding stops here too
        step = (last - first) / (len(tokens) - 1) if len(tokens) > 1 else last - first
        finish = "eos" if tokens and tokens[-1] in self.eos else "length"
        text = self.llm.detokenize([t for t in tokens if t not in self.eos]).decode("utf-8", errors="replace")
        record = run_record(tokens, step * len(tokens), len(tokens), None, 0, finish, text, first - start)
        record["ttft_s"] = record["first_token_s"]  # its own prefill included
        return record


def open_llama(gguf: Path, threads: int, context: int, extra_buffers: bool = True, **options: Any) -> Any:
    """llama_cpp.Llama on `gguf`, quiet, with `threads` for steps and batches; without extra buffer types (no
    repacking) unless `extra_buffers`; `options` go to Llama as they are."""
    from llama_cpp import Llama

    with nullcontext() if extra_buffers else without_extra_buffers():
        return Llama(
            model_path=str(gguf), n_ctx=context, n_threads=threads, n_threads_batch=threads, verbose=False, **options
        )


def default_buffers_run(gguf: Path, threads: int, probe: str = PROBE) -> bool:
    """Does llama.cpp, started with its defaults, survive a batch of several tokens on this machine?

    By default it repacks the weights into extra buffer types for the CPU's fastest kernels. On a
    Sapphire Rapids Xeon (AMX) that crashed the bench in session 61: a 1-token batch decoded, a
    10-token one segfaulted in ggml's AMX matrix product (ggml-org/llama.cpp#20824, closed unfixed).
    A segfault cannot be caught in this process, so a child process tries it first."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(gguf), str(threads)], capture_output=True, timeout=600, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


@contextmanager
def without_extra_buffers() -> Iterator[None]:
    """Within it, a new llama_cpp.Llama loads its weights without extra buffer types (no AMX or CPU
    repacking), as the engine's own llama.cpp runner always does (generation/llamacpp_lm.py).
    llama-cpp-python exposes the switch only in the C parameters its constructor makes itself."""
    from llama_cpp import llama_cpp as bindings

    made = bindings.llama_model_default_params

    def defaults() -> Any:
        params = made()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = defaults
    try:
        yield
    finally:
        bindings.llama_model_default_params = made


def check_available(gguf: Path) -> None:
    """Clear errors, before any model loads, for a missing llama-cpp-python or GGUF file."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as error:
        raise SpecragError(
            "the llamacpp-plain method needs llama-cpp-python: pip install -e '.[bench]' "
            "(it builds llama.cpp from source, ~10 min on 2 cores), or leave llamacpp-plain out of --methods"
        ) from error
    if not gguf.is_file():
        raise SpecragError(f"GGUF file {gguf} does not exist; pass the target's GGUF with --gguf FILE")


def sampler_kwargs(config: Any) -> dict:
    """llama.cpp sampling matching ours: temperature 0 is its greedy sampler; no penalties, no min-p."""
    sampling = config.sampling
    if sampling.greedy:
        return {"temp": 0.0, "top_k": 1, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}
    return {
        "temp": sampling.temperature,
        "top_k": sampling.top_k or 0,
        "top_p": sampling.top_p,
        "min_p": 0.0,
        "repeat_penalty": 1.0,
    }
