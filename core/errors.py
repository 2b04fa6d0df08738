"""The base of the small error vocabulary that specrag shows to users."""


class SpecragError(Exception):
    """Base class: the message says what went wrong and what to do."""
