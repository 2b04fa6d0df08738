"""The prompt prefix's KV cache saved by one process and loaded by the next (generation/prefix_store.py),
on a tiny random Q4_K GGUF: same logits as a prefill, never a damaged or foreign file, atomic under
kill -9 and concurrent readers."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_gguf import write_tiny_gguf

from generation.cached_lm import CachedLM
from generation.engine import Engine, GenerationConfig
from generation.llamacpp_lm import LlamaCppLM
from generation.prefix_store import MAGIC, PrefixStore
from generation.quantized_model import quantize_module_tree
from tiny import tiny_lm, tiny_wide_head_lm


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "target.gguf")


def tokens(count: int, seed: int) -> list[int]:
    return torch.randint(0, 256, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


PREFIX, QUESTION = tokens(300, 0), tokens(120, 1)


@pytest.mark.parametrize("row_invariant", [True, False], ids=["bf16-cache", "f16-cache"])
def test_a_loaded_prefix_gives_the_logits_and_answer_of_one_prefilled_in_process(
    gguf, tokenizer, tmp_path, row_invariant
):
    store = PrefixStore(tmp_path / "kv")
    warmed_here = Engine(LlamaCppLM(gguf, n_ctx=2048, row_invariant=row_invariant), tokenizer)
    warmed_here.warm(PREFIX)  # a server's warm-up, no store
    first = Engine(LlamaCppLM(gguf, n_ctx=2048, row_invariant=row_invariant), tokenizer)
    first.warm(PREFIX, store)  # nothing saved yet: prefills and saves
    assert list((tmp_path / "kv").glob("*.kv"))
    later = LlamaCppLM(gguf, n_ctx=1024, row_invariant=row_invariant)  # a smaller context, as `ask` takes
    prefills = []
    later.prefill = lambda ids: prefills.append(ids)
    loaded = Engine(later, tokenizer)
    loaded.warm(PREFIX, store)
    assert prefills == [] and later.tokens == PREFIX and later.reused == len(PREFIX)
    del later.prefill  # back to the class's own
    prompt = PREFIX + QUESTION
    config = GenerationConfig(max_new_tokens=24, speculation="none")
    expected = warmed_here.complete(prompt, [], config)
    for engine in (first, loaded):
        result = engine.complete(prompt, [], config)
        assert result.token_ids == expected.token_ids
        assert engine.target.reused == len(PREFIX)  # only the question was prefilled
    # bit-identical logits, not only the same argmax: both caches hold the same bytes
    warmed_here.target.crop(len(PREFIX))
    loaded.target.crop(len(PREFIX))
    assert np.array_equal(warmed_here.target.extend(QUESTION), loaded.target.extend(QUESTION))


def saved_file(gguf: Path, folder: Path) -> Path:
    lm = LlamaCppLM(gguf, n_ctx=1024)
    lm.prefill(PREFIX)
    PrefixStore(folder).save(lm, PREFIX)
    (path,) = folder.glob("*.kv")
    return path


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) - 100],  # torn write
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),  # one bit of the KV cache flipped
        lambda data: data.replace(MAGIC, b"something else\n"),
        lambda data: b"",
        lambda data: data.replace(b'"tokens": [', b'"tokens": [1, ', 1),  # another prompt's cache
    ],
    ids=["truncated", "bit-flip", "not-a-store-file", "empty", "other-tokens"],
)
def test_a_damaged_or_foreign_file_is_never_loaded_and_the_next_save_replaces_it(gguf, tmp_path, damage, caplog):
    path = saved_file(gguf, tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    lm = LlamaCppLM(gguf, n_ctx=1024)
    assert not PrefixStore(tmp_path).load(lm, PREFIX)
    assert lm.tokens == [] and "ignoring" in caplog.text
    lm.prefill(PREFIX)
    PrefixStore(tmp_path).save(lm, PREFIX)
    assert PrefixStore(tmp_path).load(LlamaCppLM(gguf, n_ctx=1024), PREFIX)


def test_another_model_or_cache_type_looks_elsewhere(gguf, tmp_path):
    saved_file(gguf, tmp_path)
    other_cache = LlamaCppLM(gguf, n_ctx=1024, row_invariant=False)
    assert not PrefixStore(tmp_path).load(other_cache, PREFIX)
    other_model = write_tiny_gguf(tmp_path / "other.gguf", seed=1)
    assert not PrefixStore(tmp_path).load(LlamaCppLM(other_model, n_ctx=1024), PREFIX)


def test_a_store_that_cannot_be_written_costs_a_warning_not_the_answer(gguf, tokenizer, tmp_path, caplog):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    lm = LlamaCppLM(gguf, n_ctx=1024)
    Engine(lm, tokenizer).warm(PREFIX, PrefixStore(blocked / "kv"))
    assert lm.tokens == PREFIX and "cannot save the prompt prefix" in caplog.text


def test_old_files_are_pruned_to_the_newest_few(gguf, tmp_path, monkeypatch):
    from generation import prefix_store

    monkeypatch.setattr(prefix_store, "KEEP", 2)
    lm = LlamaCppLM(gguf, n_ctx=1024)
    store = PrefixStore(tmp_path)
    for count in (100, 110, 120):
        lm.prefill(PREFIX[:count])
        store.save(lm, PREFIX[:count])
        time.sleep(0.01)
    assert len(list(tmp_path.glob("*.kv"))) == 2
    assert not store.load(lm, PREFIX[:100]) and store.load(lm, PREFIX[:120])


SAVER = """
import sys
sys.path.insert(0, {tests!r})
from generation.llamacpp_lm import LlamaCppLM
from generation.prefix_store import PrefixStore
lm = LlamaCppLM({gguf!r}, n_ctx=1024)
ids = {ids!r}
lm.prefill(ids)
store = PrefixStore({folder!r})
print("ready", flush=True)
while True:
    store.save(lm, ids)
"""


def test_kill_9_while_saving_and_readers_meanwhile_never_see_a_torn_file(gguf, tmp_path):
    folder = tmp_path / "kv"
    code = SAVER.format(tests=str(Path(__file__).parent), gguf=str(gguf), ids=PREFIX, folder=str(folder))
    root = Path(__file__).resolve().parents[2]
    reader = LlamaCppLM(gguf, n_ctx=1024)
    for round_ in range(3):
        saver = subprocess.Popen([sys.executable, "-c", code], cwd=root, stdout=subprocess.PIPE, text=True)
        assert saver.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 0.5 + 0.3 * round_
        loads = 0
        while time.monotonic() < deadline:  # read while the saver rewrites the file
            if PrefixStore(folder).load(reader, PREFIX):
                assert reader.tokens == PREFIX
                loads += 1
        os.kill(saver.pid, signal.SIGKILL)  # mid-write, most likely: it does nothing else
        saver.wait()
        assert loads > 0
        assert PrefixStore(folder).load(reader, PREFIX)  # what the kill left is whole
        assert [p.name for p in folder.glob("*.kv")] == [PrefixStore(folder).path_for(reader, PREFIX).name]


def test_threads_loading_while_another_saves_all_get_the_whole_cache(gguf, tmp_path):
    saved_file(gguf, tmp_path)
    writer = LlamaCppLM(gguf, n_ctx=1024)
    writer.prefill(PREFIX)
    stop, failures = threading.Event(), []

    def keep_saving():
        while not stop.is_set():
            PrefixStore(tmp_path).save(writer, PREFIX)

    def keep_loading():
        lm = LlamaCppLM(gguf, n_ctx=1024)
        for _ in range(20):
            if not PrefixStore(tmp_path).load(lm, PREFIX):
                failures.append("load failed")

    saver = threading.Thread(target=keep_saving)
    saver.start()
    try:
        readers = [threading.Thread(target=keep_loading) for _ in range(2)]
        for thread in readers:
            thread.start()
        for thread in readers:
            thread.join()
    finally:
        stop.set()
        saver.join()
    assert failures == []


def test_the_torch_int4_runner_saves_and_loads_its_prefix_too_with_the_same_answer_and_logits(tokenizer, tmp_path):
    model = quantize_module_tree(tiny_wide_head_lm(0, sharpness=20.0), "int4")
    store = PrefixStore(tmp_path / "kv")
    warmed_here = Engine(model, tokenizer)
    warmed_here.warm(PREFIX)
    Engine(model, tokenizer).warm(PREFIX, store)  # nothing saved yet: prefills and saves
    loaded = Engine(model, tokenizer)
    later = loaded.target
    later.prefill = lambda ids: pytest.fail("a saved prefix is loaded, not prefilled")
    loaded.warm(PREFIX, store)
    del later.prefill
    assert later.tokens == PREFIX and later.reused == len(PREFIX) and later.length == len(PREFIX)
    config = GenerationConfig(max_new_tokens=24, speculation="none")
    expected = warmed_here.complete(PREFIX + QUESTION, [], config)
    assert loaded.complete(PREFIX + QUESTION, [], config).token_ids == expected.token_ids
    assert later.reused == len(PREFIX)  # only the question was prefilled
    warmed_here.target.crop(len(PREFIX))
    later.crop(len(PREFIX))
    assert torch.equal(warmed_here.target.extend(QUESTION), later.extend(QUESTION))  # the same bytes


def test_the_torch_runner_refuses_a_payload_that_is_not_its_cache(tokenizer):
    lm = CachedLM(tiny_lm(0))
    lm.prefill(PREFIX[:40])
    payload = lm.state_bytes()
    other = CachedLM(tiny_lm(0))
    assert not other.load_state(PREFIX[:39], payload)  # another length
    assert not other.load_state(PREFIX[:40], payload[:-4])  # torn
    assert other.length == 0 and other.tokens == []
    assert other.load_state(PREFIX[:40], payload) and other.tokens == PREFIX[:40] and other.length == 40
    assert other.snapshot_prefix(PREFIX) == 40
    assert CachedLM(tiny_lm(0, hidden=32)).state_key() != lm.state_key()
