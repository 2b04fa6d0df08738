"""Typed options for the copilot: which models, which index, how to answer.

Front ends build these from their own flags or widgets; nothing below the pipeline
ever sees an argparse.Namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.copilot.gate import GATE_MODES
from app.copilot.parking import PARKED_POSITIONS
from core.errors import SpecragError
from generation.engine import SPECULATION_MODES

DEFAULT_PASSAGES = 6


@dataclass(frozen=True)
class ModelOptions:
    target: str = "default-target"  # default-target, a local HF folder or a hub id
    draft: str | None = "default-draft"  # None: no draft model (n-gram drafting only)
    device: str = "auto"  # auto | cpu | cuda
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    draft_int8: str = "auto"  # auto | on | off
    linear_layout: str = "off"  # auto | on | off
    quant: str = "auto"  # numeric path: auto | int4 | int8 | none (generation/numeric_path.py)
    # positions of a llama.cpp context (its KV cache is allocated whole); None: 8192, a conversation's worth
    context: int | None = None


# A one-question prompt: the system prompt, demonstration and template (~450 Qwen tokens here) plus
# each passage. Chunks of the default 200 embedding tokens came to at most 419 Qwen tokens with
# their header (Slurm index, 4,545 chunks; mean 140). A longer prompt loses its last passages.
ONE_QUESTION_FIXED_TOKENS = 600
ONE_QUESTION_PASSAGE_TOKENS = 512


def one_question_context(passages: int, max_new_tokens: int) -> int:
    """The context a single question needs, rounded up to 1024: `specrag ask` allocates no KV cache for
    a conversation it will never have (8192 positions of f16 cache are 235 MB for the default target;
    the loader never goes above its conversation-sized default)."""
    need = ONE_QUESTION_FIXED_TOKENS + passages * ONE_QUESTION_PASSAGE_TOKENS + max_new_tokens
    return -(-need // 1024) * 1024


@dataclass(frozen=True)
class AnswerOptions:
    passages: int = DEFAULT_PASSAGES  # how many retrieved passages go into the prompt (at most)
    speculation: str = "hybrid"  # one of SPECULATION_MODES
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()
    # prompt budget for earlier turns. A turn with 6 passages is ~1.3-1.7k tokens: 4096 keeps the last
    # two whole, so a follow-up's prompt extends the previous one and only its new part is prefilled
    # (at 1024 the previous turn lost its passages and everything after the fixed prefix was recomputed)
    history_tokens: int = 4096
    gate: str = "refuse"  # relevance gate: off | warn | refuse (see app/copilot/gate.py)
    # stop an answer caught in a loop: when a run of this many tokens comes round a third time
    # (generation/repetition.py); 0: off. 16 Qwen tokens are about two lines of prose or code.
    repeat_span: int = 16
    # decode commands, options and code spans only as the grounding check finds them in the passages
    # (app/copilot/copied_code.py); False lets the model write any and leaves them to the check's flags
    code_from_sources: bool = True
    # show no answer that cites none of its passages: hold the stream until a valid [n], withhold it if
    # none comes (app/copilot/withhold.py); False shows uncited answers, e.g. for a model that never cites
    withhold_uncited: bool = True

    def __post_init__(self) -> None:
        if self.speculation not in SPECULATION_MODES:
            raise SpecragError(
                f"unknown speculation mode {self.speculation!r}; use one of {', '.join(SPECULATION_MODES)}"
            )
        if not 1 <= self.passages <= 50:
            raise SpecragError(f"the number of passages must be between 1 and 50, got {self.passages}")
        if self.max_new_tokens < 1:
            raise SpecragError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise SpecragError(f"temperature must be 0 (greedy) or positive, got {self.temperature}")
        if self.gate not in GATE_MODES:
            raise SpecragError(f"unknown gate mode {self.gate!r}; use one of {', '.join(GATE_MODES)}")
        if self.repeat_span < 0:
            raise SpecragError(f"repeat_span must be 0 (off) or more, got {self.repeat_span}")
        if self.history_tokens < 0:
            raise SpecragError(f"history_tokens must be 0 or more, got {self.history_tokens}")


@dataclass(frozen=True)
class CopilotOptions:
    models: ModelOptions = field(default_factory=ModelOptions)
    index_dir: Path | None = None  # None: the default index under the cache root
    answer: AnswerOptions = field(default_factory=AnswerOptions)  # defaults for answer() calls
    # memory for conversations' KV caches set aside while other conversations' prompts run (parking.py);
    # 0 parks none, for a caller that never goes back to a conversation (the eval)
    park_positions: int = PARKED_POSITIONS

    def __post_init__(self) -> None:
        if self.park_positions < 0:
            raise SpecragError(f"park_positions must be 0 (park nothing) or more, got {self.park_positions}")
