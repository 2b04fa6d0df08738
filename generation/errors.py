"""The errors the generation layer shows to users (the base class lives in core)."""

from core.errors import SpecragError

__all__ = ["ModelError", "SpecragError", "VocabularyMismatchError"]


class ModelError(SpecragError):
    """A model could not be found, assembled, verified or loaded."""


class VocabularyMismatchError(ModelError):
    """Target and draft tokenize differently, so drafts cannot be verified."""
