"""Document sets that specrag can answer from: bundled runbooks and recipes for real documentation."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def bundled_runbooks_dir() -> Path:
    """The folder of Markdown shift runbooks shipped with the package (the default corpus)."""
    return _HERE / "runbooks"


def slurm_questions_path() -> Path:
    """The JSONL question set, with gold page labels, written over the Slurm documentation."""
    return _HERE / "slurm" / "questions.jsonl"


__all__ = ["bundled_runbooks_dir", "slurm_questions_path"]
