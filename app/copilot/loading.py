"""Models -> an Engine, from typed ModelOptions. The one place front ends get an engine from
(tests replace `load_engine` with tiny models)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.copilot.options import ModelOptions

if TYPE_CHECKING:
    from generation.engine import Engine


@dataclass
class LoadedEngine:
    engine: Engine
    target_path: str
    draft_path: str | None
    draft_int8: bool = False  # the draft's linear layers run with dynamic int8 weights
    linear_layout_patched: bool = False
    quant: str = "none"  # the numeric path the models run on: int4 | int8 | none
    target: str = ""  # the target as named in ModelOptions ("default-target"): what a judge is calibrated for

    def describe(self) -> dict:
        return {
            "target": self.target_path,
            "draft": self.draft_path,
            "draft_int8": self.draft_int8,
            "quant": self.quant,
            "verifies_drafts": self.engine.verifies_drafts,
        }


def load_engine(options: ModelOptions) -> LoadedEngine:
    """Load the target (and the draft unless `options.draft` is None) and wrap them in an Engine."""
    from generation.engine import Engine
    from generation.models import load_models

    draft = options.draft if options.draft and options.draft.lower() != "none" else None
    models = load_models(
        options.target,
        draft,
        options.device,
        options.dtype,
        options.draft_int8,
        options.linear_layout,
        quant=options.quant,
        context=options.context,
    )
    engine = Engine(models.target, models.tokenizer, models.draft)
    return LoadedEngine(
        engine,
        models.target_path,
        models.draft_path,
        models.draft_int8,
        models.linear_layout_patched,
        models.quant,
        options.target,
    )


def unused_draft(options: ModelOptions, loaded: LoadedEngine) -> str | None:
    """Why a draft model the user named is not used, or None: the numeric path verifies no drafts
    (llamacpp-f16, whose logits depend on how many tokens share a pass), so it loaded none."""
    named = options.draft and options.draft.lower() != "none" and options.draft != ModelOptions.draft
    if not named or loaded.engine.verifies_drafts:
        return None
    return (
        f"--draft {options.draft} is not used: the {loaded.quant} path verifies no drafts (a token's logits "
        "there depend on how many tokens share its pass), so answers decode plainly; --quant llamacpp "
        "speculates exactly"
    )
