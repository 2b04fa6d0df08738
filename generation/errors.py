"""The small error vocabulary that the generation layer shows to users."""


class SpecragError(Exception):
    """Base class: the message says what went wrong and what to do."""


class ModelError(SpecragError):
    """A model could not be found, assembled, verified or loaded."""


class VocabularyMismatchError(ModelError):
    """Target and draft tokenize differently, so drafts cannot be verified."""
