"""The copilot pipeline under every front end: `Copilot.load(options).answer(question, history)`
yields Status, Token and Final events (see events.py)."""

from app.copilot.events import Citations, Event, Final, GroundingItem, Passage, Segment, Status, Token, Turn
from app.copilot.loading import LoadedEngine, load_engine
from app.copilot.options import AnswerOptions, CopilotOptions, ModelOptions
from app.copilot.pipeline import ContextBudgetError, Copilot, EmptyQuestionError, collect

__all__ = [
    "AnswerOptions",
    "Citations",
    "ContextBudgetError",
    "Copilot",
    "CopilotOptions",
    "EmptyQuestionError",
    "Event",
    "Final",
    "GroundingItem",
    "LoadedEngine",
    "ModelOptions",
    "Passage",
    "Segment",
    "Status",
    "Token",
    "Turn",
    "collect",
    "load_engine",
]
