"""Assembling packaged GGUF parts: missing packages, checksum mismatch, atomic output."""

import hashlib
import sys

import pytest
import torch

from generation.errors import ModelError, VocabularyMismatchError
from generation.model_store import PackagedGGUF, assemble_gguf, part_paths
from generation.models import check_same_vocabulary, resolve_model
from tiny import tiny_lm


def fake_parts(tmp_path, monkeypatch, prefix: str, blobs: list[bytes]) -> None:
    """Install importable packages prefix1..N, each with data/partNN.bin, like the model wheels."""
    site = tmp_path / "site"
    for n, blob in enumerate(blobs, start=1):
        package = site / f"{prefix}{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(blob)
    monkeypatch.syspath_prepend(str(site))
    for name in list(sys.modules):
        if name.startswith(prefix):
            del sys.modules[name]


def spec(prefix: str, parts: int, sha: str) -> PackagedGGUF:
    return PackagedGGUF(
        alias="fake-model",
        description="fake test model",
        distribution=prefix.replace("_", "-"),
        parts=parts,
        version="0.0.1",
        sha256=sha,
    )


def test_parts_are_concatenated_in_order_and_verified(tmp_path, monkeypatch):
    blobs = [b"GGUF-head-", b"middle-", b"tail" * 1000]
    fake_parts(tmp_path, monkeypatch, "fakegguf_ok_part", blobs)
    sha = hashlib.sha256(b"".join(blobs)).hexdigest()
    path = assemble_gguf(spec("fakegguf_ok_part", 3, sha), tmp_path / "cache")
    assert path.read_bytes() == b"".join(blobs)
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_checksum_mismatch_is_a_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    fake_parts(tmp_path, monkeypatch, "fakegguf_bad_part", [b"abc", b"def"])
    with pytest.raises(ModelError, match=r"checksum mismatch.*fakegguf-bad-part1\.\.2.*force-reinstall"):
        assemble_gguf(spec("fakegguf_bad_part", 2, "0" * 64), tmp_path / "cache")
    assert list((tmp_path / "cache" / "gguf").iterdir()) == []


def test_missing_model_packages_name_the_install_command(tmp_path, monkeypatch):
    fake_parts(tmp_path, monkeypatch, "fakegguf_partial_part", [b"only one"])
    expected = r"missing model packages: fakegguf-partial-part2.*pip install -e '\.\[models\]'"
    with pytest.raises(ModelError, match=expected):
        part_paths(spec("fakegguf_partial_part", 3, "0" * 64))


def test_missing_local_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(str(tmp_path / "no-such-model"))


def test_vocabulary_mismatch_is_refused(tokenizer):
    target, other = tiny_lm(0), tiny_lm(1, vocab_size=300)
    with pytest.raises(VocabularyMismatchError, match="share a vocabulary"):
        check_same_vocabulary(tokenizer, tokenizer, target, other)
    check_same_vocabulary(tokenizer, tokenizer, target, tiny_lm(2))  # same family: accepted


def test_a_draft_folder_with_the_targets_tokenizer_files_reuses_its_tokenizer_and_another_is_loaded_and_checked(
    tmp_path, tokenizer
):
    from transformers import AutoTokenizer

    from generation.models import draft_tokenizer, same_tokenizer_files

    target, same, other = (tmp_path / name for name in ("target", "same", "other"))
    for folder in (target, same, other):
        tokenizer.save_pretrained(folder)
    assert draft_tokenizer(str(target), str(same), tokenizer) is tokenizer
    extended = AutoTokenizer.from_pretrained(other)
    extended.add_tokens(["<extra>"])
    extended.save_pretrained(other)
    loaded = draft_tokenizer(str(target), str(other), tokenizer)
    assert loaded is not tokenizer and "<extra>" in loaded.get_vocab()
    with pytest.raises(VocabularyMismatchError, match="different ids"):
        check_same_vocabulary(tokenizer, loaded, tiny_lm(0), tiny_lm(0))
    assert not same_tokenizer_files(target, tmp_path / "not-a-folder")  # a hub id: nothing here to compare
    assert not same_tokenizer_files(tmp_path, tmp_path)  # no tokenizer files at all


def test_cpu_defaults_to_float32_and_the_draft_stays_int8_under_a_bf16_target(tmp_path, tokenizer):
    from generation import models

    folder = tmp_path / "tiny"
    tiny_lm(0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert models.load_models(str(folder), None, device="cpu", quant="none").target.dtype == torch.float32
    loaded = models.load_models(str(folder), str(folder), device="cpu", dtype="bfloat16")  # explicit dtype: no quant
    assert loaded.target.dtype == torch.bfloat16
    # the draft runs float32 activations over int8 weights whatever the target's dtype
    assert loaded.draft_int8 and loaded.draft.dtype == torch.float32
    assert ".quantized.dynamic." in type(loaded.draft.model.layers[0].mlp.up_proj).__module__


def test_the_quantized_path_runs_target_and_draft_on_the_int4_kernels(tmp_path, tokenizer):
    from generation import models
    from generation.quantized import Int4Linear

    folder = tmp_path / "tiny"
    tiny_lm(0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    loaded = models.load_models(str(folder), str(folder), device="cpu", quant="int4")
    assert loaded.quant == "int4" and not loaded.draft_int8
    for model in (loaded.target, loaded.draft):
        assert isinstance(model.model.layers[0].mlp.up_proj, Int4Linear)
