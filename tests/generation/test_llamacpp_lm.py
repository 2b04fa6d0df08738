"""The llama.cpp runner (generation/llamacpp_lm.py) on a tiny random Q4_K GGUF: row invariance,
cache verbs, and speculation that decodes exactly plain's tokens."""

import gc
import logging
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from exactness import assert_greedy_speculation_matches_plain
from tiny_gguf import write_tiny_gguf

from generation import llamacpp_log
from generation.arrays import log_softmax
from generation.calibration import SIZES
from generation.drafters.policy import PassCost
from generation.engine import Engine, GenerationConfig
from generation.errors import ModelError, SpecragError
from generation.llamacpp_lm import MAX_ROWS, LlamaCppLM


@pytest.fixture(scope="module")
def gguf_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gguf")
    return write_tiny_gguf(folder / "target.gguf"), write_tiny_gguf(folder / "draft.gguf", noise=0.03)


@pytest.fixture(scope="module")
def target_lm(gguf_files) -> LlamaCppLM:
    return LlamaCppLM(gguf_files[0], n_ctx=2048, threads=2, keep_snapshot=False)


def tokens(count: int, seed: int) -> list[int]:
    return torch.randint(0, 256, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def test_a_token_decoded_plainly_and_verified_in_the_widest_pass_get_bit_identical_logits(target_lm):
    # 600 cached positions: past the 512 keys from which llama.cpp's flash attention would split a
    # one-row pass across threads (with an f16 cache), so the test covers the regime of real prompts
    context, new = tokens(600, 0), tokens(MAX_ROWS, 1)
    target_lm.reset()
    target_lm.extend(context, last_only=True)
    plain = np.stack([target_lm.extend([token])[-1].copy() for token in new])
    for width in range(2, MAX_ROWS + 1):
        target_lm.crop(len(context))
        assert np.array_equal(target_lm.extend(new[:width]), plain[:width]), width


def test_prefill_keeps_the_common_prefix_with_the_last_prompt_and_crop_rolls_back(gguf_files):
    lm = LlamaCppLM(gguf_files[0], n_ctx=1024)
    first = tokens(300, 2)
    after_first = lm.prefill(first)
    assert lm.reused == 0 and lm.length == 300 and after_first.shape == (1, 257)
    lm.extend(tokens(5, 3))  # an answer after the prompt
    second = first[:200] + tokens(50, 4)
    lm.prefill(second)
    assert lm.reused == 200 and lm.tokens == second
    assert lm.prefill(second) is None and lm.reused == 250  # the whole prompt is cached
    before = lm.extend([7, 8, 9])
    lm.crop(250)
    assert lm.length == 250 and np.array_equal(lm.extend([7, 8, 9]), before)
    with pytest.raises(ValueError, match="cannot crop"):
        lm.crop(400)


def test_an_empty_context_shrinks_to_what_a_prompt_needs_and_computes_the_same_logits(gguf_files):
    lm, fresh = LlamaCppLM(gguf_files[0], n_ctx=2048), LlamaCppLM(gguf_files[0], n_ctx=512)
    assert lm.shrink_context(512) and lm.config.max_position_embeddings == 512
    prompt = tokens(300, 5)
    assert np.array_equal(lm.prefill(prompt), fresh.prefill(prompt))
    assert np.array_equal(lm.extend([7, 8]), fresh.extend([7, 8]))
    assert not lm.shrink_context(256) and lm.config.max_position_embeddings == 512  # it holds tokens: left alone
    lm.reset()
    assert not lm.shrink_context(1024)  # never grows
    with pytest.raises(SpecragError, match="more than the 512 of this model's context"):
        lm.extend(tokens(600, 6))  # the smaller context is enforced


def test_a_conversation_longer_than_the_context_is_refused_with_what_to_do(gguf_files):
    lm = LlamaCppLM(gguf_files[0], n_ctx=256)
    lm.extend(tokens(200, 5), last_only=True)
    with pytest.raises(Exception, match="start a new conversation"):
        lm.extend(tokens(100, 6))
    assert lm.length == 200  # nothing half-fed


def test_greedy_speculation_equals_plain_decoding_on_llama_cpp(gguf_files, tokenizer):
    target = LlamaCppLM(gguf_files[0], n_ctx=2048)
    draft = LlamaCppLM(gguf_files[1], n_ctx=2048)
    engine = Engine(target, tokenizer, draft)
    assert_greedy_speculation_matches_plain(engine)
    # the draft model agrees often but not always: drafts were both kept and rolled back
    prompt = tokens(120, 2)
    result = engine.complete(prompt, [prompt[10:60]], GenerationConfig(max_new_tokens=40, draft_length=6))
    assert result.stats.accepted["model"] + result.stats.accepted["ngram"] > 0
    assert result.stats.accepted["model"] < result.stats.drafted["model"]


def test_the_engine_never_verifies_more_rows_than_the_runner_keeps_invariant(gguf_files, tokenizer):
    target = LlamaCppLM(gguf_files[0], n_ctx=2048)
    widths = []
    extend = target.extend

    def recording(token_ids, last_only=False):
        if not last_only:
            widths.append(len(token_ids))
        return extend(token_ids, last_only)

    target.extend = recording
    engine = Engine(target, tokenizer, LlamaCppLM(gguf_files[0], n_ctx=2048))  # the same model: every draft kept
    # passes that cost no more than one row: the policy wants 16-token drafts. Set here, not calibrated: a
    # calibration times passes of up to 16 rows (timing only), and one measured under load is measured again
    engine.cost = PassCost(dict.fromkeys(SIZES, 1.0))
    prompt = tokens(100, 7)
    engine.complete(prompt, [prompt], GenerationConfig(max_new_tokens=40, draft_length=16, speculation="model"))
    assert max(widths) == MAX_ROWS


def test_an_f16_cache_verifies_no_drafts_so_every_mode_decodes_plainly(gguf_files, tokenizer):
    target = LlamaCppLM(gguf_files[0], n_ctx=2048, row_invariant=False)
    assert target.max_pass_rows == 1
    engine = Engine(target, tokenizer)  # no draft model: none is loaded for this cache
    prompt = tokens(600, 8)  # past 512 cached keys: the f16 cache's one-row passes split them
    plain = engine.complete(prompt, [], GenerationConfig(max_new_tokens=24, speculation="none"))
    for mode in ("ngram", "hybrid"):
        result = engine.complete(prompt, [prompt[100:400]], GenerationConfig(max_new_tokens=24, speculation=mode))
        assert result.token_ids == plain.token_ids
        assert result.stats.target_passes == len(result.token_ids) and sum(result.stats.drafted.values()) == 0


def test_the_kv_cache_choice_times_prefill_and_steps_on_the_real_runner(gguf_files, monkeypatch):
    from generation import numeric_path as paths

    monkeypatch.setattr(paths, "gguf_file", lambda name: gguf_files[0])
    answer = paths.measure_llamacpp_kv("default-target")
    assert set(answer) == {"llamacpp", "llamacpp-f16"} and all(seconds > 0 for seconds in answer.values())


def test_a_broken_gguf_fails_with_llama_cpps_reason_and_a_load_prints_nothing(gguf_files, tmp_path, capfd):
    whole = gguf_files[0].read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[: len(whole) * 2 // 3])  # a download that stopped part way
    with pytest.raises(ModelError, match=r"could not load .*cut\.gguf \(.*(file bounds|failed).*complete GGUF"):
        LlamaCppLM(cut, n_ctx=256)
    LlamaCppLM(gguf_files[0], n_ctx=256)
    assert capfd.readouterr().err == ""  # llama.cpp's info and warnings stay in the logger, errors in ours


def test_llama_cpp_log_levels_follow_ggml_h_and_pieces_join_into_lines(caplog):
    from generation import llamacpp_log

    gc.collect()  # a context freed now logs its own lines ("~llama_context: ...")
    caplog.set_level(logging.DEBUG, logger="specrag.llama_cpp")
    llamacpp_log.recent_errors.clear()
    llamacpp_log.on_log(3, b"load: control-looking token: 128247 '</s>' was not control-type\n")  # WARN in ggml.h
    llamacpp_log.on_log(4, b"failed to read ")  # ERROR, in two pieces
    llamacpp_log.on_log(5, b"header\n")  # CONT: same level as the piece before
    llamacpp_log.on_log(2, b"print_info: n_ctx = 256\n")
    ours = ("load:", "failed", "print_info:")  # llama.cpp itself may log from other objects meanwhile
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith(ours)] == [
        (logging.WARNING, "load: control-looking token: 128247 '</s>' was not control-type"),
        (logging.ERROR, "failed to read header"),
        (logging.INFO, "print_info: n_ctx = 256"),
    ]
    assert llamacpp_log.why_failed() == "failed to read header"


def test_next_token_logprobs_on_llamacpp_match_the_prefill_and_survive_a_cached_prompt(gguf_files):
    lm = LlamaCppLM(gguf_files[0], n_ctx=1024)
    engine = Engine(lm, None, eos_token_ids=[])
    prompt = tokens(120, 8)
    scored = engine.next_token_logprobs(prompt, (3, 5))
    expected = log_softmax(LlamaCppLM(gguf_files[0], n_ctx=1024).prefill(prompt)[-1])
    assert scored == [float(expected[3]), float(expected[5])]  # the same pieces, the same logits
    assert lm.tokens == prompt  # kept for the answer's prefill
    # whole prompt cached: the engine feeds the last token again (a different batch split, so near, not equal)
    assert engine.next_token_logprobs(prompt, (3, 5)) == pytest.approx(scored, abs=1e-2)


def test_ctrl_c_while_llama_cpp_logs_a_load_stops_the_load(gguf_files, monkeypatch):
    """Ctrl-C pressed while llama.cpp logs: Python's handler would raise in the log callback, where ctypes
    prints and drops the KeyboardInterrupt, and the load would go on."""
    real = llamacpp_log.on_log
    pressed = []

    def on_log(level, text):
        if not pressed:
            pressed.append(True)
            signal.raise_signal(signal.SIGINT)  # a real Ctrl-C, in the middle of the load's logging
        real(level, text)

    monkeypatch.setattr(llamacpp_log, "on_log", on_log)
    with pytest.raises(KeyboardInterrupt):
        LlamaCppLM(gguf_files[0], n_ctx=256)
    assert pressed and signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    assert LlamaCppLM(gguf_files[0], n_ctx=256).vocab_size == 257  # raised once, not again
