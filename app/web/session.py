"""One browser session's conversation: its exchanges, what the chat shows of each, the history it passes on.

An Exchange is the view of one question: a status log (the thought message), the answer
text as it streams, and at the end the pipeline's Final (sources, stats, provenance) or an
error. ChatState (kept in gr.State) is the list of exchanges; the pipeline history is the
`Final.turn` of every answered one, so a stopped or failed answer is not carried forward.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from app.copilot import Event, Final, Status, Token, Turn
from app.copilot.conversation import your_previous
from app.copilot.withhold import withheld_reason
from app.web import render


@dataclass
class Exchange:
    question: str
    title: str = "waiting for the engine…"
    log: list[str] = field(default_factory=list)
    pending: bool = True
    duration: float | None = None
    answer: str = ""
    note: str = ""
    final: Final | None = None
    error: str = ""
    reading: str = "answering"
    warning: str = ""
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def status(self, text: str, title: str | None = None) -> None:
        self.log.append(f"{self.elapsed():.1f} s · {text}")
        self.title = title or text

    def apply(self, event: Event) -> None:
        """Fold one pipeline event into the view."""
        if isinstance(event, Status):
            self.status(event.message)
            if event.stage == "passages":
                turns, count = event.detail.get("history_turns", 0), event.detail.get("count", 0)
                self.reading = (
                    f"read {_count(count, 'new passage')} · with {_count(turns, 'earlier turn')}"
                    if turns
                    else f"read {_count(count, 'passage')}"
                )
                # so a follow-up's odd sources can be told apart
                if earlier := event.detail.get("searched_with_previous"):
                    self.reading += f" · searched together with {your_previous(int(earlier))}"
                self.log += list(event.detail.get("sources", []))  # the sources, before the answer
                if not count and not turns:
                    self.warning = (
                        "no passages: the index is empty or nothing matched, so this answer is not from your documents"
                    )
            if event.stage == "generating":
                # the title says the time: Gradio's duration after it would say it again ("4.6 s (4.6s)")
                self.close(f"{self.reading} · first token after {self.elapsed():.1f} s", timed=False)
        elif isinstance(event, Token):
            self.answer += event.text
        elif isinstance(event, Final):
            self.final, self.answer = event, event.shown
            if event.gated:
                self.close("the sources do not cover this question: not answered")
            elif event.withheld:
                self.warning = f"withheld: {withheld_reason(event.withheld)}"

    def close(self, title: str, timed: bool = True) -> None:
        if self.pending:
            self.pending, self.duration, self.title = False, self.elapsed() if timed else None, title

    def stopped(self) -> None:
        self.note = "stopped"
        self.close("stopped")

    def fail(self, message: str) -> None:
        self.error = message
        self.close("could not answer")

    def messages(self) -> list[render.Message]:
        shown = [
            render.user_message(self.question),
            render.status_message(self.title, self.log, self.pending, self.duration),
        ]
        answer = None
        if self.answer or self.note or self.final is not None:
            answer = render.answer_message(self.answer, self.note, self.final)
        if self.warning and answer is not None:  # heads the answer's own message: one set of buttons, not two
            answer = {**answer, "content": f"{render.error_html(self.warning)}\n\n{answer['content']}"}
        elif self.warning:  # nothing of the answer yet ("no passages" comes before it)
            shown.append(render.error_message(self.warning))
        if answer is not None:
            shown.append(answer)
        if self.error:
            shown.append(render.error_message(self.error))
        return shown


@dataclass
class ChatState:
    exchanges: list[Exchange] = field(default_factory=list)

    def messages(self) -> list[render.Message]:
        return [m for exchange in self.exchanges for m in exchange.messages()]

    def history(self) -> list[Turn]:
        return [e.final.turn for e in self.exchanges if e.final is not None]

    def exchange_at(self, message_index: int) -> Exchange | None:
        """The exchange that the chat message at this index belongs to."""
        seen = 0
        for exchange in self.exchanges:
            seen += len(exchange.messages())
            if message_index < seen:
                return exchange
        return None

    def pop_last(self) -> Exchange | None:
        return self.exchanges.pop() if self.exchanges else None


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")
