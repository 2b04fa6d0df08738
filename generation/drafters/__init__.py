"""Drafters propose tokens for the target to verify; see `base.Drafter`."""

from generation.drafters.base import Draft, Drafter, Origin
from generation.drafters.hybrid import HybridDrafter
from generation.drafters.model import ModelDrafter
from generation.drafters.ngram import NgramDrafter

__all__ = ["Draft", "Drafter", "HybridDrafter", "ModelDrafter", "NgramDrafter", "Origin"]
