"""The llama.cpp row-invariance probe reports which pass widths give a token the same logits."""

import numpy as np

from app import bench_llamacpp_rows as rows_probe


class RegimeLlama:
    """llama.cpp stand-in whose logits for a token depend on its position and on the pass width's regime."""

    def __init__(self, vocab: int = 5) -> None:
        self.scores = np.zeros((64, vocab), dtype=np.float32)
        self.n_tokens = 0

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens: list[int]) -> None:
        offset = 0.0 if len(tokens) == 1 else 0.25 if len(tokens) < 8 else 0.5  # 1 | 2-7 | 8+ rows
        for i, token in enumerate(tokens):
            row = self.n_tokens + i
            self.scores[row] = np.arange(self.scores.shape[1]) * (token % 3) + row + offset
        self.n_tokens += len(tokens)


def test_rows_agree_within_a_width_regime_and_differ_across_regimes():
    prefill_s, rows = rows_probe.probe(RegimeLlama(), list(range(10)), list(range(16)))
    report = {row["width"]: row for row in rows}
    assert prefill_s >= 0
    assert set(report) == {1, *rows_probe.WIDTHS}
    assert [w for w, row in report.items() if row["vs_widest"] == 0.0] == [8, 9, 12, 16]
    assert all(report[w]["vs_widest"] == 0.25 and report[w]["vs_single"] == 0.25 for w in range(2, 8))
    assert report[1]["vs_widest"] == 0.5 and report[16]["vs_single"] == 0.5
    assert all(row["argmax_agrees"] == 1.0 for row in report.values())  # a constant shift keeps the argmax
    assert report[1]["identical_to"] == [] and report[2]["identical_to"] == [3, 4, 5, 6, 7]
    assert report[12]["identical_to"] == [8, 9, 16]


def test_no_repack_reaches_the_model_parameters_the_llama_class_reads(monkeypatch, tmp_path):
    import sys
    import types

    bindings = types.SimpleNamespace(llama_model_default_params=lambda: types.SimpleNamespace(use_extra_bufts=True))

    class Llama:  # like llama-cpp-python's: reads its defaults from the bindings module at construction
        def __init__(self, **kwargs):
            self.params = bindings.llama_model_default_params()

    package = types.SimpleNamespace(Llama=Llama, llama_cpp=bindings)
    monkeypatch.setitem(sys.modules, "llama_cpp", package)
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_cpp", bindings)
    gguf = tmp_path / "m.gguf"
    assert rows_probe.load(gguf, 2, repack=False, flash_attn=False, context=64).params.use_extra_bufts is False
    assert rows_probe.load(gguf, 2, repack=True, flash_attn=False, context=64).params.use_extra_bufts is True
    assert bindings.llama_model_default_params().use_extra_bufts is True  # restored after loading


def test_padding_every_pass_to_the_wide_regime_makes_every_chunking_agree(capsys):
    llm, context, tokens = RegimeLlama(), list(range(10)), list(range(16))
    llm.eval(context)

    def gap(chunks: tuple[int, ...], multiple: int) -> float:
        one_by_one = rows_probe.fed(llm, len(context), tokens, (1,) * 16, multiple)
        return rows_probe.diff(rows_probe.fed(llm, len(context), tokens, chunks, multiple), one_by_one)

    assert gap((16,), 1) == 0.5 and gap((3, 5, 2, 6), 1) == 0.25  # unpadded: the regime of each pass shows
    assert gap((3, 5, 2, 6), 4) == 0.25  # padded to 4, a 5-row chunk becomes 8 rows: another regime
    assert all(gap(chunks, 8) == 0.0 for chunks in rows_probe.CHUNKINGS)  # every pass in the 8+ regime
    rows_probe.padded(RegimeLlama(), context, tokens, rows_probe.pad_widths("1,8"))
    table = capsys.readouterr().out.splitlines()
    assert table[2:] == ["| 1 | 0.25 | 0.25 | 0.25 | 0.5 | 0.5 |", "| 8 | 0 | 0 | 0 | 0 | 0 |"]


def test_a_bad_pad_list_is_a_clear_error():
    import pytest

    from core.errors import SpecragError

    for bad in ("4,x", "", "0", "100"):
        with pytest.raises(SpecragError, match="comma list of widths"):
            rows_probe.pad_widths(bad)
