"""The int4/int8 path: packaged weights carried over exactly, and rows independent of their pass."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from exactness import WIDEST, assert_greedy_speculation_matches_plain, assert_widest_pass_matches_plain_steps
from gguf import GGMLQuantizationType
from gguf.quants import dequantize
from safetensors.torch import save_file

from generation.engine import Engine
from generation.gguf_blocks import Q4_K_BYTES, q4k_groups
from generation.invariant_attention import MAX_ROWS
from generation.numeric_path import resolve_path
from generation.quantized import HalfEmbedding, Int4Linear, Int8Linear, Q4KEmbedding
from generation.quantized_model import (
    embedding_tables,
    load_quantized,
    numeric_path,
    quantize_module_tree,
    read_safetensors,
    save_quantized,
)
from tiny import tiny_wide_head_lm


def random_q4k(rows: int, columns: int, seed: int = 0) -> np.ndarray:
    """Valid Q4_K bytes: random codes and 6-bit scales, small float16 super-block scales."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(rows, columns // 256, Q4_K_BYTES), dtype=np.uint8)
    d = rng.uniform(1e-3, 1e-2, size=(rows, columns // 256, 2)).astype(np.float16)
    blocks[..., 0:4] = d.view(np.uint8).reshape(rows, columns // 256, 4)
    return blocks.reshape(rows, -1)


def test_q4k_blocks_map_to_int4_groups_exactly():
    raw = random_q4k(32, 512)
    codes, scale, offset = q4k_groups(raw)
    ours = codes.float() * scale.repeat_interleave(32, 1) + offset.repeat_interleave(32, 1)
    reference = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q4_K)).reshape(32, 512)
    assert torch.equal(ours, reference)


def test_q4k_embedding_decodes_the_rows_it_looks_up():
    raw = random_q4k(40, 256, seed=1)
    table = Q4KEmbedding(40, 256)
    table.blocks = torch.from_numpy(raw)
    reference = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q4_K)).reshape(40, 256)
    ids = torch.tensor([[3, 0, 39, 3]])
    assert torch.equal(table(ids)[0], reference[ids[0]])


@pytest.mark.parametrize("layer", [Int4Linear, Int8Linear])
def test_each_output_row_is_independent_of_the_rows_beside_it(layer):
    weight, x = torch.randn(64, 256) * 0.05, torch.randn(WIDEST, 256)
    linear = layer.from_float(weight, torch.randn(64))
    alone = torch.cat([linear(x[i : i + 1]) for i in range(WIDEST)])
    assert torch.equal(linear(x), alone)
    reference = x @ weight.t() + linear.bias
    assert (linear(x) - reference).abs().max() < 0.1 * reference.abs().max()  # and it is the same product


@pytest.fixture(scope="module", params=["int4", "int8"])
def quantized(request):
    return quantize_module_tree(tiny_wide_head_lm(0, sharpness=20.0), request.param)


def test_a_token_decoded_plainly_and_verified_in_the_widest_pass_get_bit_identical_logits(quantized):
    assert_widest_pass_matches_plain_steps(quantized)
    assert WIDEST <= MAX_ROWS


def test_greedy_speculation_equals_plain_decoding_on_the_quantized_path(quantized, tokenizer):
    draft = quantize_module_tree(tiny_wide_head_lm(1, sharpness=20.0), numeric_path(quantized))
    assert_greedy_speculation_matches_plain(Engine(quantized, tokenizer, draft))


def test_a_saved_quantized_model_loads_without_a_float_copy_and_gives_the_same_logits(quantized, tmp_path):
    save_quantized(quantized, tmp_path)
    loaded = load_quantized(tmp_path)
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.inference_mode():
        assert torch.equal(loaded(input_ids=ids).logits, quantized(input_ids=ids).logits)
    assert numeric_path(loaded) == numeric_path(quantized)


def _mappings(path: Path) -> list[tuple[int, int, int]]:
    """(start, end, resident bytes) of each of this process's mappings of `path` (Linux smaps)."""
    with open("/proc/self/smaps") as smaps:
        lines = smaps.readlines()
    found = []
    for line in lines:
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            start, end = (int(x, 16) for x in fields[0].split("-"))
            found.append([start, end, 0, fields[-1] == str(path)])
        elif fields[0] == "Rss:" and found:
            found[-1][2] = int(fields[1]) * 1024
    return [(start, end, rss) for start, end, rss, ours in found if ours]


@pytest.mark.parametrize("kind", ["half", "q4k"])
def test_a_loaded_embedding_table_is_a_view_of_the_file_and_gives_the_same_logits(kind, tmp_path):
    model = quantize_module_tree(tiny_wide_head_lm(0), "int4")
    vocab, hidden = model.config.vocab_size, model.config.hidden_size
    if kind == "half":
        table = HalfEmbedding(vocab, hidden)
        table.table = model.model.embed_tokens.weight.detach().to(torch.bfloat16)
    else:
        table = Q4KEmbedding(vocab, hidden)
        table.blocks = torch.from_numpy(random_q4k(vocab, hidden, seed=2))
    model.model.embed_tokens = table
    save_quantized(model, tmp_path)
    loaded = load_quantized(tmp_path)
    ids = torch.tensor([[5, 200, 256, 77]])
    with torch.inference_mode():
        assert torch.equal(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    buffer = next(loaded.model.embed_tokens.buffers())
    mapped = _mappings((tmp_path / "quantized.safetensors").resolve())
    assert any(start <= buffer.data_ptr() < end for start, end, _ in mapped)
    assert all(not any(start <= t.data_ptr() < end for start, end, _ in mapped) for t in loaded.lm_head.buffers())


def test_a_mapped_embedding_table_holds_in_memory_only_the_pages_of_the_rows_looked_up(tmp_path):
    path = tmp_path / "quantized.safetensors"
    table = torch.arange(32768 * 1024, dtype=torch.float32).reshape(32768, 1024).to(torch.bfloat16)  # 64 MB
    kinds = json.dumps({"model.embed_tokens": "HalfEmbedding"})
    save_file({"model.embed_tokens.table": table, "lm_head.scales": torch.ones(8)}, str(path), {"kinds": kinds})
    state, _ = read_safetensors(path, mapped=embedding_tables)
    ids = torch.tensor([3, 10000, 20000, 32767])
    assert torch.equal(state["model.embed_tokens.table"][ids], table[ids])
    mapped = _mappings(path.resolve())
    resident = sum(rss for _, _, rss in mapped)
    assert 0 < resident < table.numel() * 2 // 4  # 4 rows (and their neighbours), not the table
    assert state["lm_head.scales"].data_ptr() not in range(*mapped[0][:2])


def test_the_path_is_measured_once_per_machine_and_float32_stays_one_flag_away(tmp_path, monkeypatch):
    from generation import numeric_path as paths

    calls = []
    monkeypatch.setattr(paths, "measure_paths", lambda: calls.append(1) or {"none": 3.0, "int4": 1.0, "int8": 2.0})
    cache, cpu = tmp_path / "calibration.json", torch.device("cpu")
    assert resolve_path("auto", cpu, "auto", cache) == "int4"
    assert resolve_path("auto", cpu, "auto", cache) == "int4" and len(calls) == 1
    assert any(k.startswith("path:") for k in json.loads(cache.read_text()))
    assert resolve_path("auto", cpu, "float32", cache) == "none"  # --dtype float32: the reference path
    assert resolve_path("auto", torch.device("cuda"), "auto", cache) == "none"  # CUDA keeps its path
    assert resolve_path("int8", cpu, "auto", cache) == "int8"


def test_a_path_measured_while_other_work_shares_the_cpu_serves_busy_starts_until_a_quiet_one(tmp_path, monkeypatch):
    from machine_fakes import FakeLoad

    from generation import calibration
    from generation import numeric_path as paths
    from generation.path_choice import remembered_auto_path

    calls = []
    monkeypatch.setattr(paths, "fresh_process_threads", torch.get_num_threads)  # as a new `specrag` process runs
    monkeypatch.setattr(calibration, "BUSY_PROBE_SECONDS", 0.01)
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(1.0))
    monkeypatch.setattr(paths, "measure_paths", lambda: calls.append(1) or {"none": 3.0, "int4": 1.0, "int8": 2.0})
    monkeypatch.setattr(paths, "llamacpp_available", lambda: True)
    monkeypatch.setattr(paths, "measure_answer_seconds", lambda *a: {"int4": 9.0, "llamacpp": 8.0, "llamacpp-f16": 7.0})
    cache, cpu = tmp_path / "calibration.json", torch.device("cpu")
    assert resolve_path("auto", cpu, "auto", cache, "default-target") == "llamacpp-f16" and len(calls) == 1
    # still busy: the next start takes the same choice without torch, and nothing is measured again
    assert remembered_auto_path(cache, "default-target", "cpu", "auto") == "llamacpp-f16"
    assert resolve_path("auto", cpu, "auto", cache, "default-target") == "llamacpp-f16" and len(calls) == 1
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(0.0))
    assert remembered_auto_path(cache, "default-target", "cpu", "auto") is None  # quiet: resolve it again
    assert resolve_path("auto", cpu, "auto", cache, "default-target") == "llamacpp-f16" and len(calls) == 2
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(1.0))
    assert remembered_auto_path(cache, "default-target", "cpu", "auto") == "llamacpp-f16"  # kept for good now
    assert json.loads(cache.read_text())[calibration.UNDER_LOAD] == {}


def test_a_process_running_torch_on_another_thread_count_than_a_new_one_leaves_no_torch_free_record(
    tmp_path, monkeypatch
):
    # session 62: the test suite (1 thread) measured int4 slower than llama.cpp and recorded that for every later
    # process, which run 2 threads and were then sent to llamacpp-f16
    from generation import numeric_path as paths
    from generation.path_choice import remembered_auto_path

    monkeypatch.setattr(paths, "measure_paths", lambda: {"none": 3.0, "int4": 1.0, "int8": 2.0})
    monkeypatch.setattr(paths, "llamacpp_available", lambda: True)
    monkeypatch.setattr(paths, "measure_answer_seconds", lambda *a: {"int4": 9.0, "llamacpp": 8.0, "llamacpp-f16": 7.0})
    cache, cpu = tmp_path / "calibration.json", torch.device("cpu")
    probe = paths.fresh_process_threads.__wrapped__  # the real probe, uncached
    monkeypatch.setattr(paths, "fresh_process_threads", lambda: torch.get_num_threads() + 1)
    assert resolve_path("auto", cpu, "auto", cache, "default-target") == "llamacpp-f16"
    assert remembered_auto_path(cache, "default-target", "cpu", "auto") is None
    monkeypatch.setattr(paths, "fresh_process_threads", torch.get_num_threads)
    assert resolve_path("auto", cpu, "auto", cache, "default-target") == "llamacpp-f16"
    assert remembered_auto_path(cache, "default-target", "cpu", "auto") == "llamacpp-f16"
    assert probe() >= 1  # a new interpreter reports its own count


@pytest.mark.parametrize(
    "answer, chosen",
    [
        ({"int4": 9.0, "llamacpp": 7.0, "llamacpp-f16": 8.0}, "llamacpp"),
        ({"int4": 9.0, "llamacpp": 8.4, "llamacpp-f16": 7.2}, "llamacpp-f16"),
        ({"int4": 6.0, "llamacpp": 8.4, "llamacpp-f16": 7.2}, "int4"),
    ],
)
def test_auto_runs_a_packaged_target_on_the_path_that_finishes_a_typical_answer_soonest(
    tmp_path, monkeypatch, answer, chosen
):
    # session 43: the f16 cache is weighed against the torch path too, not only when llama.cpp's row-invariant
    # cache beats it on a 1- plus 4-row step (int4 was kept where llamacpp-f16 answered in half the time)
    from generation import numeric_path as paths

    calls = []
    monkeypatch.setattr(paths, "measure_paths", lambda: {"none": 3.0, "int4": 1.0, "int8": 2.0})
    monkeypatch.setattr(paths, "llamacpp_available", lambda: True)
    monkeypatch.setattr(
        paths, "measure_answer_seconds", lambda target, torch_path: calls.append((target, torch_path)) or answer
    )
    cache, cpu = tmp_path / "calibration.json", torch.device("cpu")
    assert resolve_path("auto", cpu, "auto", cache, "default-target") == chosen
    assert resolve_path("auto", cpu, "auto", cache, "default-target") == chosen
    assert calls == [("default-target", "int4")]  # measured once per machine
    assert resolve_path("auto", cpu, "auto", cache) == "int4"  # a model given as a folder: torch paths only
    assert resolve_path("auto", cpu, "float32", cache, "default-target") == "none"  # the reference stays one flag away


def test_the_answer_projection_loads_each_runner_and_times_prefill_and_passes(monkeypatch):
    from generation import numeric_path as paths

    timed = []
    monkeypatch.setattr(paths, "measure_llamacpp_kv", lambda target: {"llamacpp": 8.0, "llamacpp-f16": 7.0})
    monkeypatch.setattr(
        paths,
        "measure_prefill_and_passes",
        lambda lm, sizes, repeats, context: timed.append((sizes, context)) or (6.4, {n: 0.04 * n for n in sizes}),
    )
    monkeypatch.setattr(
        "generation.models.load_quantized_models", lambda *a: type("Loaded", (), {"target": torch.nn.Linear(2, 2)})
    )
    monkeypatch.setattr(paths, "CachedLM", lambda model, keep_snapshot: model)
    answer = paths.measure_answer_seconds("default-target", "int4")
    assert timed == [(paths.TORCH_PASS_SIZES, paths.KV_CONTEXT)]
    # passes costing n times one row buy nothing: 900 prompt tokens at 0.01 s plus 120 steps of 0.04 s
    assert answer == {"llamacpp": 8.0, "llamacpp-f16": 7.0, "int4": pytest.approx(9.0 + 4.8)}


@pytest.mark.parametrize("layer", [Int4Linear, Int8Linear])
def test_prefill_sized_passes_take_the_dequantized_matmul_and_agree_with_the_kernel(layer):
    from generation import quantized as q

    linear = layer.from_float(torch.randn(128, 64) * 0.05, None)
    wide = q.WIDE_ROWS_INT4 if layer is Int4Linear else q.WIDE_ROWS
    x = torch.randn(wide, 64)
    if layer is Int4Linear:
        assert q.int4_block() in (32, 64)  # a layout we can read, AVX512 or AVX2
    kernel = torch.cat([linear(x[i : i + 8]) for i in range(0, wide, 8)])
    assert (linear(x) - kernel).abs().max() < 0.02 * kernel.abs().max()  # bf16 rounding of the weight only


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dequantized_weights_are_the_kernel_formula_exactly_and_the_workspace_is_reused_safely(dtype):
    from generation import quantized as q

    a4, b4 = (Int4Linear.from_float(torch.randn(n, k) * 0.05, None) for n, k in ((128, 64), (64, 128)))
    a8 = Int8Linear.from_float(torch.randn(q.INT8_ROWS_PER_STEP + 44, 64) * 0.05, None)  # two blocks of rows
    codes = q.unpack_int4_centered(a4.packed, 64, q.int4_block()).reshape(-1, 32, 128)
    scale, zero = a4.scales_zeros[..., 0].unsqueeze(1), a4.scales_zeros[..., 1].unsqueeze(1)
    expected4 = torch.addcmul(zero.to(dtype), codes.to(dtype), scale.to(dtype)).reshape(64, 128)
    expected8 = a8.weight_int8.to(dtype) * a8.scales[:, None].to(dtype)
    assert torch.equal(a4.dequantized_t(dtype), expected4) and torch.equal(a8.dequantized(dtype), expected8)
    first = a4.dequantized_t(dtype, reuse=True).clone()
    b4.dequantized_t(dtype, reuse=True)  # other layers write the same workspace in between
    assert torch.equal(a8.dequantized(dtype, reuse=True), expected8)
    assert torch.equal(first, expected4) and torch.equal(a4.dequantized_t(dtype, reuse=True), expected4)


class FakeGGUF:
    """GGUFTensors' reading verbs over a dict of (kind, float weight)."""

    def __init__(self, tensors):
        self.tensors = tensors

    def __contains__(self, name):
        return name in self.tensors

    def kind(self, name):
        return self.tensors[name][0]

    def floats(self, name):
        return self.tensors[name][1]


@pytest.mark.parametrize(
    ("mode", "shape", "expected"),
    [
        ("int4", (128, 64), Int8Linear),  # the target keeps its more-than-4-bit matrices in int8
        ("int4-all", (128, 64), Int4Linear),  # a draft takes int4 wherever the kernel tiles
        ("int4-all", (100, 64), Int8Linear),  # ... and int8 where it does not
    ],
)
def test_a_draft_build_puts_every_tileable_matrix_in_int4(mode, shape, expected):
    from torch import nn

    from generation.quantized_model import _linear_from_gguf

    weight = torch.randn(shape) * 0.05
    tensors = FakeGGUF({"blk.0.attn_q.weight": (GGMLQuantizationType.Q8_0, weight)})
    layer = _linear_from_gguf(tensors, "model.layers.0.self_attn.q_proj", nn.Linear(*shape[::-1]), mode)
    assert type(layer) is expected
    x = torch.randn(3, shape[1])
    error = (layer(x) - x @ weight.t()).abs().max() / (x @ weight.t()).abs().max()
    assert error < (0.15 if expected is Int4Linear else 0.02)  # the same weights, coarser or finer


def test_the_int4_prefill_crossover_is_measured_once_per_machine_and_never_reaches_verification(tmp_path, monkeypatch):
    from generation import numeric_path
    from generation import quantized as q

    calls = []
    monkeypatch.setattr(numeric_path, "measure_wide_plan", lambda: calls.append(1) or {"dtype": "float32", "rows": 437})
    cache = tmp_path / "calibration.json"
    assert numeric_path.cached_wide_plan(cache) == numeric_path.cached_wide_plan(cache) == (torch.float32, 437)
    assert calls == [1] and any(k.startswith(f"{numeric_path.WIDE_PLAN}:") for k in json.loads(cache.read_text()))
    saved = q.WIDE_ROWS_INT4
    try:
        q.set_int4_wide_rows(3)
        assert q.WIDE_ROWS_INT4 == q.MIN_WIDE_ROWS > MAX_ROWS  # a verification pass always takes the kernel
    finally:
        q.set_int4_wide_rows(saved)


def test_the_measured_crossover_lies_within_its_bounds():
    from generation import numeric_path

    dtype, rows = numeric_path.cached_wide_plan(None)
    assert dtype in (torch.bfloat16, torch.float32)
    assert numeric_path.MIN_WIDE_ROWS <= rows <= numeric_path.MAX_WIDE_ROWS


def test_a_matmul_that_grows_faster_than_the_kernel_never_takes_over(monkeypatch):
    """A dequantized matmul slower per row than the int4 kernel (bf16 on AVX2: 20 s for 600 rows) never wins."""
    from generation import numeric_path

    times = iter([0.01, 1.0, 0.08, 8.0])  # kernel, dequantized at 128 rows; then at 1024
    monkeypatch.setattr(numeric_path, "_seconds", lambda fn, x: next(times))
    assert numeric_path.measure_wide_rows(repeats=1) == numeric_path.MAX_WIDE_ROWS


@pytest.mark.parametrize("layer", [Int4Linear, Int8Linear])
def test_prefill_in_float32_agrees_with_the_kernel(layer):
    from generation import quantized as q

    linear = layer.from_float(torch.randn(128, 64) * 0.05, None)
    x = torch.randn(q.MIN_WIDE_ROWS, 64)
    kernel = torch.cat([linear(x[i : i + 8]) for i in range(0, len(x), 8)])
    saved = q.WIDE_ROWS_INT4, q.WIDE_ROWS, q.WIDE_DTYPE
    try:
        q.set_int4_wide_rows(q.MIN_WIDE_ROWS)
        q.WIDE_ROWS = q.MIN_WIDE_ROWS
        q.set_wide_dtype(torch.float32)
        wide = linear(x)
    finally:
        q.WIDE_ROWS_INT4, q.WIDE_ROWS, q.WIDE_DTYPE = saved
    assert (wide - kernel).abs().max() < 0.02 * kernel.abs().max()  # only the kernel's bf16 activations differ


def test_drafts_buy_time_on_a_flat_pass_cost_curve_and_none_where_each_row_costs_a_step():
    from generation.numeric_path import projected_answer_seconds, speculation_gain

    flat = {1: 0.10, 2: 0.10, 4: 0.11, 7: 0.12}  # AMX-like: 7 rows cost 1.2 steps
    steep = {1: 0.084, 2: 0.166, 4: 0.263, 7: 0.441}  # llama.cpp's bf16 cache on the AVX2 EPYC (README)
    assert speculation_gain(flat, draft_step=0.0) > 2.5  # free drafts: long ones pay
    assert 1.4 < speculation_gain(flat) < 1.6  # paying ~0.3 of a step per drafted token (AMX measured 1.46x)
    # session 43's int4 curve on the AVX512-BF16 EPYC: free drafts projected 2.2x where its bench measured 1.20x
    int4 = {1: 0.042, 2: 0.047, 3: 0.052, 4: 0.058, 6: 0.070, 8: 0.082}
    assert speculation_gain(int4, draft_step=0.0) > 2.0 and speculation_gain(int4) < 1.4
    assert speculation_gain(steep) == pytest.approx(1.0, abs=0.01)
    assert speculation_gain({1: 0.088}) == 1.0  # a path that verifies no drafts
    # same prefill: the flat curve's drafts win; steep curve: the faster prefill (f16 cache) wins
    assert projected_answer_seconds(0.02, flat) < projected_answer_seconds(0.02, {1: 0.10})
    assert projected_answer_seconds(0.0185, {1: 0.088}) < projected_answer_seconds(0.0233, steep)


@pytest.mark.parametrize("mode", ["int4", "int8"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_prefill_through_the_gated_mlp_is_bit_identical_to_hugging_faces_mlp(mode, dtype, monkeypatch):
    from generation import quantized as q
    from generation.gated_mlp import ROWS, GatedMLP

    model = quantize_module_tree(tiny_wide_head_lm(0), mode)
    assert all(isinstance(layer.mlp, GatedMLP) for layer in model.model.layers)
    monkeypatch.setattr(q, "WIDE_DTYPE", dtype)
    taken, blockwise = [], GatedMLP._wide_products

    def spied(self, rows):
        products = blockwise(self, rows)
        taken.append(products is not None)
        return products

    monkeypatch.setattr(GatedMLP, "_wide_products", spied)
    ids = torch.randint(0, 256, (1, max(q.WIDE_ROWS_INT4, q.WIDE_ROWS, ROWS) + 45))  # two blocks of rows
    with torch.inference_mode():
        ours = model(input_ids=ids).logits
        assert taken == [True] * len(model.model.layers)
        model(input_ids=ids[:, :WIDEST])
        assert taken[len(model.model.layers) :] == [False] * len(model.model.layers)  # a verification pass
        monkeypatch.setattr(GatedMLP, "_wide_products", lambda self, rows: None)  # Hugging Face's formula
        reference = model(input_ids=ids).logits
    assert torch.equal(ours, reference)


def test_a_cache_file_cut_short_inside_a_mapped_table_says_to_rebuild_it(tmp_path):
    path = tmp_path / "quantized.safetensors"
    kinds = json.dumps({"model.embed_tokens": "HalfEmbedding"})
    save_file({"model.embed_tokens.table": torch.ones(64, 8, dtype=torch.bfloat16)}, str(path), {"kinds": kinds})
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size - 10)
    with pytest.raises(ValueError, match="delete its folder to rebuild it"):
        read_safetensors(path, mapped=embedding_tables)
