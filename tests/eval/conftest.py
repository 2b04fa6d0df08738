"""Fixtures for the `specrag eval` tests (helpers in evalkit.py)."""

from pathlib import Path

import pytest

from .evalkit import build_index, tiny_loaded


@pytest.fixture(scope="session")
def fake_index(tmp_path_factory) -> Path:
    index_dir = tmp_path_factory.mktemp("eval-index") / "index"
    build_index(index_dir)
    return index_dir


@pytest.fixture(scope="session")
def loaded_tiny():
    return tiny_loaded()
