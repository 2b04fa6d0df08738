"""The copilot pipeline under every front end: `Copilot.load(options).answer(question, history)`
yields Status, Token and Final events (see events.py)."""

from app.copilot.events import Citations, Event, Final, GroundingItem, Passage, Segment, Status, Token, Turn
from app.copilot.loading import LoadedEngine, load_engine
from app.copilot.options import AnswerOptions, CopilotOptions, ModelOptions
from app.copilot.pipeline import ContextBudgetError, Copilot, EmptyQuestionError, checked_question, collect

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
    "checked_question",
    "collect",
    "load_engine",
]
