"""`auto`'s decision read back without torch (generation/path_choice.py), so `specrag ask` on llama.cpp
loads no torch; and only while the machine, its thread settings and the releases are those it was made on."""

import pytest
import torch

from generation import models, path_choice
from generation.numeric_path import resolve_path


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(path_choice, "cuda_driver_present", lambda: False)
    for name in path_choice.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "calibration.json"


def test_what_auto_resolved_to_is_recorded_and_read_back_only_where_it_still_applies(cache, monkeypatch):
    from generation import numeric_path

    monkeypatch.setattr(numeric_path, "_fastest_on_cpu", lambda cache_file, target: ("llamacpp-f16", True))
    monkeypatch.setattr(numeric_path, "fresh_process_threads", torch.get_num_threads)  # as in a new process
    assert path_choice.remembered_auto_path(cache, "default-target", "auto", "auto") is None  # nothing measured yet
    assert resolve_path("auto", torch.device("cpu"), "auto", cache, "default-target") == "llamacpp-f16"
    assert path_choice.remembered_auto_path(cache, "default-target", "auto", "auto") == "llamacpp-f16"
    assert path_choice.remembered_auto_path(cache, "default-target", "cpu", "auto") == "llamacpp-f16"
    assert path_choice.remembered_auto_path(cache, "default-draft", "auto", "auto") is None  # another model
    assert path_choice.remembered_auto_path(cache, "default-target", "auto", "float32") is None  # the reference path
    assert path_choice.remembered_auto_path(cache, "default-target", "cuda", "auto") is None
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # torch would run with other threads: measured again
    assert path_choice.remembered_auto_path(cache, "default-target", "auto", "auto") is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(path_choice, "cuda_driver_present", lambda: True)  # a GPU may be there: torch decides
    assert path_choice.remembered_auto_path(cache, "default-target", "auto", "auto") is None


def test_a_remembered_llama_cpp_path_loads_without_resolving_it_again(cache, monkeypatch, tmp_path):
    from generation import numeric_path

    monkeypatch.setattr(models, "cache_root", lambda: tmp_path)
    path_choice.remember_auto_path(cache, "default-target", "llamacpp-f16")
    loaded = []
    monkeypatch.setattr(models, "load_llamacpp_models", lambda *a, **kw: loaded.append(kw["row_invariant"]) or "m")

    def resolved_again(*args):
        raise LookupError("resolved again")

    monkeypatch.setattr(numeric_path, "resolve_path", resolved_again)
    monkeypatch.setattr(models, "llamacpp_available", lambda: True)
    assert models.load_models("default-target", None) == "m" and loaded == [False]
    with pytest.raises(LookupError):  # --dtype float32 still goes through the full resolution
        models.load_models("default-target", None, dtype="float32")


def test_a_damaged_calibration_file_means_measuring_again(cache):
    cache.write_text("{not json")
    assert path_choice.remembered_auto_path(cache, "default-target", "auto", "auto") is None
    path_choice.remember_auto_path(cache, "default-target", "llamacpp")
    assert path_choice.remembered_auto_path(cache, "default-target", "auto", "auto") == "llamacpp"


@pytest.fixture()
def own_gguf(cache, tmp_path, monkeypatch):
    """A user's own .gguf target (a tiny random one), loads recorded instead of run, a quiet machine."""
    from machine_fakes import FakeLoad
    from tiny_gguf import write_tiny_gguf

    from generation import calibration, numeric_path

    monkeypatch.setattr(models, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(calibration, "OtherLoad", lambda: FakeLoad(0.0))
    monkeypatch.setattr(models, "llamacpp_available", lambda: True)
    monkeypatch.setattr(numeric_path, "llamacpp_available", lambda: True)
    loaded, measured = [], []
    monkeypatch.setattr(models, "load_llamacpp_models", lambda target, *a, **kw: loaded.append(kw["row_invariant"]))

    def measure(target):
        measured.append(target)
        return {"llamacpp": 2.0, "llamacpp-f16": 1.5}

    monkeypatch.setattr(numeric_path, "measure_llamacpp_kv", measure)
    return write_tiny_gguf(tmp_path / "mine.gguf"), loaded, measured


def test_a_gguf_file_given_as_the_target_runs_on_llama_cpp_measured_once_for_that_file(own_gguf):
    import os

    path, loaded, measured = own_gguf
    models.load_models(str(path), None)  # before: read as a model folder that "does not exist"
    assert loaded == [False] and measured == [str(path)]  # the faster cache of the two, f16 here
    models.load_models(str(path), None)
    assert loaded == [False, False] and len(measured) == 1  # remembered for this file
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the file replaced in place
    models.load_models(str(path), None)
    assert len(measured) == 2


def test_a_gguf_file_on_a_torch_path_or_a_missing_one_is_refused_with_what_to_run(own_gguf):
    from generation.errors import ModelError

    path, loaded, _ = own_gguf
    with pytest.raises(ModelError, match=r"GGUF file: it runs as it is on llama\.cpp, not on the int4 path; run"):
        models.load_models(str(path), None, quant="int4")
    with pytest.raises(ModelError, match="not on the none path; run it with --quant auto"):
        models.load_models(str(path), None, dtype="float32")
    with pytest.raises(ModelError, match=r"does not exist: pass a \.gguf file"):
        models.load_models(str(path.with_name("missing.gguf")), None)
    with pytest.raises(ModelError, match=r"mine\.gguf is a GGUF file: it runs as it is on llama\.cpp, not on the int4"):
        models.load_models("default-target", str(path), quant="int4")  # a draft of one's own too
    models.load_models(str(path), None, quant="llamacpp")
    assert loaded == [True]
