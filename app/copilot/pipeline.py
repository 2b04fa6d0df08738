"""The copilot pipeline: question -> retrieval -> prompt -> generation -> events.

`Copilot.answer(question, history, options)` is the one path from a question to an
answer; every front end renders the events it yields (see events.py). The copilot holds
one engine (models loaded once) and serves answers one at a time: an answer holds the
engine lock from prefill to its last event, and a consumer that stops iterating (stop
button, disconnect, error) closes the generator, which releases the engine at once.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from app.copilot import citations as cite
from app.copilot import gate, loading, parking
from app.copilot.attribution import attribute, judge_quotes
from app.copilot.borrowed import borrowed_sentences, with_example_words, without_copied
from app.copilot.code_spans import prose
from app.copilot.comparisons import wrong_comparisons
from app.copilot.config_files import misplaced_settings
from app.copilot.conversation import (
    follow_up_passages,
    keep_history,
    nearest_passages,
    number_new_passages,
    searched_with,
    your_previous,
)
from app.copilot.copied_code import CopiedCode
from app.copilot.cut_code import cut_code
from app.copilot.definitions import defined_options, first_sentence
from app.copilot.events import Event, Final, Passage, Recitation, Status, Token, Turn
from app.copilot.example_facts import example_facts
from app.copilot.grounding import check_grounding
from app.copilot.loading import LoadedEngine
from app.copilot.neighbour_quotes import neighbour_quotes
from app.copilot.option_values import unlisted_values
from app.copilot.options import AnswerOptions, CopilotOptions, ModelOptions
from app.copilot.prompting import (
    JUDGE_QUESTION,
    build_messages,
    encode_chunks,
    encode_prompt,
    passage_label,
    shared_prompt_ids,
    shown_text,
)
from app.copilot.recite import recite
from app.copilot.repeats import repeats_earlier_answer, shown_answer, without_sentences
from app.copilot.said_before import said_before
from app.copilot.splices import spliced_sentences
from app.copilot.subcommands import with_tools
from app.copilot.swapped import swapped_subjects
from app.copilot.thresholds import thresholds
from app.copilot.tool_pages import ToolPages, read_tool_pages
from app.copilot.withhold import (
    UNCITED,
    CitationGuard,
    ContactGuard,
    UnsourcedSubjectCheck,
    example_credential_notice,
    misattributed_notice,
    own_site_notice,
    quoted_source,
    withheld_notice,
)
from core.errors import SpecragError
from core.memory import release_free_memory
from core.paths import prefix_store_dir
from generation.prefix_store import PrefixStore
from generation.token_ids import common_prefix_length

if TYPE_CHECKING:
    from generation.drafters import Origin
    from generation.engine import Engine, GenerationConfig


class EmptyQuestionError(SpecragError):
    """The question is blank."""


SEARCHING = "searching the sources…"  # the status while the index is searched
CHECKING = "asking the model whether the sources answer the question…"
WEAK_MATCH = "the closest source is a weak match: "  # said first when the judge decides a question below the threshold


def checked_question(question: str) -> str:
    """The question without surrounding blanks; an empty one is refused before any work is done."""
    if not question.strip():
        raise EmptyQuestionError("the question is empty: type a question about the indexed documents")
    return question.strip()


class ContextBudgetError(SpecragError):
    """The question (with the answer budget) does not fit the model's context."""


class Copilot:
    def __init__(
        self,
        loaded: LoadedEngine | None,  # None: a retrieval-only copilot (see retrieval_only)
        options: CopilotOptions | None = None,
        retriever: Any = None,  # anything with retrieve(query, k) -> scored chunks; opened lazily when None
    ) -> None:
        self.loaded, self.options = loaded, options or CopilotOptions()
        self._retriever = retriever
        # what the index was built with, once the passages come from a search elsewhere (searched_with)
        self._released_embedding_model: str | None = None
        self._released_pages = ToolPages()
        self._pages_of: tuple[str | None, ToolPages] | None = None  # (generation, its tool pages)
        self._engine_lock = threading.Lock()
        # the shared prompt prefix's length once it is in the engine's cache (warm_up or the first answer), else 0
        self._fixed_prefix = 0
        # where the prompts in the target's cache began to be computed, and the last of those prompts
        self._piece_starts: list[int] = []
        self._pieces_of: list[int] = []
        self._parking = parking.ParkingLot(self.options.park_positions)  # conversations' caches set aside (parking.py)
        self._retriever_lock = threading.Lock()

    @classmethod
    def load(
        cls, options: CopilotOptions | None = None, open_index_first: bool = False, need_index: bool = True
    ) -> Copilot:
        """Load the models; with `open_index_first`, check the index before them, so that a missing one
        is reported in a second rather than after the models have loaded (a damaged one is found as it
        opens), and open it (with its embedding model) in a thread while they load (~0.5 s sooner; `ask`
        searches in a child process instead: search_process.py).
        Without `need_index` (the chat), a missing or unreadable index is left for each question to report.
        The models load in this thread: torch's and OpenMP's thread counts are per thread, and a numeric
        path's settings must stay with the thread that will generate."""
        options = options or CopilotOptions()
        models = options.models
        if options.answer.speculation not in ("model", "hybrid"):
            models = replace(models, draft=None)
        if not open_index_first:
            return cls(cls._loaded(models, options), options)
        from retrieval.store import default_index_dir, require_live

        if need_index:
            require_live(options.index_dir or default_index_dir())
        import_shared_modules()
        with ThreadPoolExecutor(1, thread_name_prefix="specrag-index") as pool:
            index = pool.submit(cls._open_index, options, need_index)
            loaded = cls._loaded(models, options)
        return cls(loaded, options, index.result())

    @staticmethod
    def _loaded(models: ModelOptions, options: CopilotOptions) -> LoadedEngine:
        """The engine (tests swap loading.load_engine for tiny models), saying on stderr if a draft model
        the user named goes unused: nothing else would tell them."""
        loaded = loading.load_engine(models)
        if options.answer.speculation in ("model", "hybrid") and (why := loading.unused_draft(options.models, loaded)):
            print(f"specrag: {why}", file=sys.stderr, flush=True)
        return loaded

    @classmethod
    def _open_index(cls, options: CopilotOptions, need_index: bool) -> Any:
        try:
            return cls.retrieval_only(options).retriever()
        except SpecragError:
            if need_index:
                raise
            return None

    @classmethod
    def retrieval_only(cls, options: CopilotOptions | None = None, retriever: Any = None) -> Copilot:
        """A copilot that loads no generation models: `retrieve` works, `answer` raises SpecragError."""
        return cls(None, options, retriever)

    @property
    def engine(self) -> Engine:
        if self.loaded is None:
            raise SpecragError("this copilot was opened for retrieval only: it has no models to answer with")
        return self.loaded.engine

    def warm_up(self) -> float:
        """Prefill the system prompt and demonstration now (a server calls this at start), so the
        first question pays only for its own tokens. Returns the seconds it took."""
        with self._engine_lock:
            return self._warm().seconds

    def _warm_once(self) -> _Warm:
        """`_warm` if the prefix is not cached yet, else nothing to count. Under the engine lock."""
        return self._warm() if not self._fixed_prefix else _Warm()

    def _warm(self) -> _Warm:
        """Put the shared prompt prefix in the KV cache, loading it from the prefix store where the runner
        can (llama.cpp: generation/prefix_store.py), else prefilling it (and saving it). Under the engine lock.

        The first answer warms too, so a one-shot `specrag ask` or an eval computes its prompt in the same
        pieces as a server that warmed at start: prefix, then the rest. Same pieces, same logits."""
        prefix = shared_prompt_ids(self.engine.tokenizer)
        seconds = self.engine.warm(prefix, store=PrefixStore(prefix_store_dir()))
        self._fixed_prefix = len(prefix)
        self._piece_starts, self._pieces_of = [len(prefix)], list(prefix)
        target = self.engine.target
        return _Warm(target.length - target.reused, seconds)  # tokens loaded from the store were not computed

    @property
    def busy(self) -> bool:
        return self._engine_lock.locked()

    def retriever(self) -> Any:
        """The index's live retriever, opened on first use (loads the embedding model).

        It follows the index: an ingest that finishes while the copilot serves is seen on the
        next question, without a restart (retrieval.live.LiveRetriever).
        """
        with self._retriever_lock:
            if self._retriever is None:
                from retrieval.live import LiveRetriever

                self._retriever = LiveRetriever(self.options.index_dir)
                self._released_embedding_model = None
            return self._retriever

    def fit_context(self, question: str, passages: Sequence[Passage], options: AnswerOptions | None = None) -> bool:
        """Shrink the target's still-empty context to this one question's prompt and answer (`specrag ask`,
        which sized it for the worst case before its passages were known); True if it shrank. Only the
        llama.cpp runner can; its KV cache and compute buffers are allocated for every position."""
        options = options or self.options.answer
        shrink = getattr(self.engine.target, "shrink_context", None)
        if shrink is None:
            return False
        prompt = self._prepare(question, [], list(passages), options, False).prompt_ids
        return shrink(-(-(len(prompt) + options.max_new_tokens) // CONTEXT_STEP) * CONTEXT_STEP)

    def searched_with(self, embedding_model: str | None, pages: ToolPages | None = None) -> None:
        """The passages this copilot will be handed were searched elsewhere (`ask`'s search process,
        app/copilot/search_process.py) in an index built with `embedding_model`, whose tools' pages say `pages`:
        the gate reads its threshold for that model, and the checks those pages, without opening the index
        here. A later `retrieve` opens it."""
        with self._retriever_lock:
            self._retriever, self._released_embedding_model = None, embedding_model
            self._released_pages = pages or ToolPages()

    def tool_pages(self) -> ToolPages:
        """What the served index's tool pages say (tool_pages.py: each tool's commands and options), worked out
        once per index generation; empty before the index is open, or for a retriever that holds no chunks."""
        with self._retriever_lock:
            retriever = self._retriever
            if retriever is None:
                return self._released_pages
            # the generation first: a reload in between caches the new chunks under the old name, read again next time
            generation = getattr(retriever, "generation", None)
            chunks = getattr(retriever, "chunks", None)
            if chunks is None:
                return ToolPages()
            if self._pages_of is None or self._pages_of[0] != generation:
                self._pages_of = (generation, read_tool_pages(chunks))
            return self._pages_of[1]

    @property
    def embedding_model(self) -> str | None:
        """The id of the index's embedding model (what the relevance gate's threshold belongs to)."""
        if self._retriever is None and self._released_embedding_model is not None:
            return self._released_embedding_model
        embedder = getattr(self.retriever(), "embedder", None)
        return getattr(embedder, "model_id", None)

    def retrieve(self, query: str, k: int) -> list[Passage]:
        hits = self.retriever().retrieve(query, k)
        return [
            Passage(
                i + 1,
                h.text,
                h.source,
                h.title,
                getattr(h, "heading", ""),
                round(float(h.score), 6),
                h.chunk_id,
                _dense(h),
                getattr(h, "entry", ""),
            )
            for i, h in enumerate(hits)
        ]

    def retrieve_for(self, question: str, history: Sequence[Turn], k: int) -> tuple[list[Passage], str]:
        """Passages for a question in its conversation, and the query used (app/copilot/conversation.py)."""

        def stands_alone(passages: list[Passage]) -> bool:
            relevance = gate.assess(passages, self.embedding_model)
            return relevance.threshold is not None and relevance.covered

        return follow_up_passages(question, history, lambda query: self.retrieve(query, k), stands_alone)

    def further_rankings(self, question: str, query: str, history: Sequence[Turn], k: int) -> tuple[list[Passage], ...]:
        """Where a follow-up's places go when its k passages hold what the earlier turns' passages hold
        (conversation.number_new_passages): the next passages of its search, `query`. None for a question
        searched alone, which keeps the earlier turns bare.

        Not the question searched alone as well: over the six Slurm follow-up sets that reached a gold page for
        one follow-up more (63 of 66 against 62), but its passages are those the relevance gate found too far
        from the question to stand alone, and in the chat "How do I take it out of production while I
        investigate?" after a question on exit code 137 was answered from them, with the security-incident
        runbook's hand-over to the security officer. Taken only where they pass the gate, they changed no
        follow-up's figures (README, "Follow-ups")."""
        if not history or query == question:
            return ()
        return (self.retrieve(query, 2 * k),)

    def answer(
        self,
        question: str,
        history: Sequence[Turn] = (),
        options: AnswerOptions | None = None,
        passages: Sequence[Passage] | None = None,
    ) -> Iterator[Event]:
        """Stream the answer to `question`; `passages` given skips retrieval (e.g. --context-file)."""
        options = options or self.options.answer
        question = checked_question(question)
        started = time.perf_counter()
        # searched alone after earlier turns: they stay bare, so its sources are numbered from [1] (conversation.py)
        searched_alone = with_previous = False
        further: tuple[list[Passage], ...] = ()
        places = None
        if passages is None:
            yield Status("searching", SEARCHING)
            passages, query = self.retrieve_for(question, history, options.passages)
            places = options.passages
            further = self.further_rankings(question, query, history, places)
            searched_alone = bool(history) and query == question
            # a follow-up searched together with the question before it (or the two before it): how many
            with_previous = len(searched_with(history)) if query != question else 0
        # retrieved passages carry their similarity (also when a caller such as eval retrieved them)
        retrieved = any(p.similarity is not None for p in passages)
        relevance = None
        if options.gate != "off" and retrieved:
            target = self.loaded.target if self.loaded else None
            relevance = gate.assess(passages, self.embedding_model, target, question)
        retrieval_s = time.perf_counter() - started
        prepared = self._prepare(question, list(history), list(passages), options, searched_alone, places, further)
        prepared.relevance = relevance
        detail = {
            "count": len(prepared.new_passages),
            "prompt_tokens": len(prepared.prompt_ids),
            # shown while the prompt is prefilled (tens of seconds on a CPU): the operator can open the page meanwhile
            "sources": [f"[{p.number}] {passage_label(p)}" for p in prepared.new_passages],
            "searched_with_previous": with_previous,
            **prepared.notes,
        }
        # the judge has the last word below the threshold, and a veto above it, under the engine lock (gate.py)
        judge = relevance is not None and relevance.needs_judge and gate.judge_tokens(self.engine.tokenizer) is not None
        if relevance is not None and not relevance.covered and not judge:
            detail["relevance"] = relevance.to_dict()
            if options.gate == "refuse":
                yield Status("passages", "the sources do not cover this question", detail)
                yield from self._refuse(prepared, started, retrieval_s)
                return
        warning = gate.weak_match_warning(detail.get("relevance"))  # --gate warn: say so before the answer
        yield Status(
            "passages",
            f"reading {len(prepared.new_passages)} passages ({len(prepared.prompt_ids)} prompt tokens)"
            + (f"; searched together with {your_previous(with_previous)}" if with_previous else "")
            + (f"; warning: {warning}" if warning else ""),
            detail,
        )
        with self._engine_lock:  # answers queue here; closing the stream releases it
            try:
                if judge:
                    warm = yield from self._check(prepared, options, started, retrieval_s)
                    if warm is None:
                        return  # refused
                    yield Status("prefilling", f"prefilling {len(prepared.prompt_ids)} prompt tokens…")
                else:  # not judged: computed in the same pieces as a judged answer, up to its closing line first
                    yield Status("prefilling", f"prefilling {len(prepared.prompt_ids)} prompt tokens…")
                    warm = self._warm_once()
                    self._in_fixed_pieces(prepared.prompt_ids)
                    warm = warm + self._before_closing(prepared.prompt_ids, self._judge_prompt_ids(prepared))
                yield from self._generate(prepared, options, started, retrieval_s, warm)
            finally:
                release_free_memory()  # keeps a long-running front end's memory flat (core/memory.py)

    def _in_fixed_pieces(self, prompt_ids: list[int]) -> None:
        """Let the target reuse the cached prompt only up to where one of the prompts before it began to be
        computed: all of it when this one extends it (a follow-up, a retry), else the longest such start it
        shares (at least the fixed prefix), so every prompt is computed in the same pieces whatever was asked
        in between. On llamacpp-f16 logits depend on how a prompt is split into passes, and reusing whatever a
        question shared with the one before it (a title, a passage) made its answer depend on what was asked
        before (session 29: an eval answer changed when the question before it stopped being refused).

        The starts are where each turn's prompt went on from the one before it. A follow-up after an answer
        that was stopped (the web's Stop: the stopped turn is left out of the history) shares the earlier
        turns with the stopped prompt and goes on from the end of the last of them, as it would have had
        nothing come between; before session 41 it prefilled the whole conversation again. Under the engine
        lock, after warming."""
        target = self.engine.target
        self._take_parked(prompt_ids)
        if target.snapshot_prefix(self._pieces_of) < max(self._piece_starts, default=0):
            self._piece_starts = [self._fixed_prefix]  # the cache was computed by someone else: start over
        # a prompt the cache holds whole (the same question asked again) is computed again from where it began:
        # taken whole, its last token was fed alone, and the judge's log-odds moved (0.38 against 0.50, int4)
        shared = min(target.snapshot_prefix(prompt_ids), len(prompt_ids) - 1)
        if shared < target.snapshot_length:
            keep = max((s for s in self._piece_starts if s <= shared), default=self._fixed_prefix)
            self._parking.park(target, keep, self._piece_starts, self._pieces_of)
            target.trim_snapshot(keep)
        start = target.snapshot_length  # this prompt is computed from here on
        self._piece_starts = [s for s in self._piece_starts if s < start] + [start]
        self._pieces_of = list(prompt_ids)

    def _take_parked(self, prompt_ids: list[int]) -> None:
        """Put the parked conversation back in the cache when `prompt_ids` go on from it (parking.py), parking
        the cache it replaces. Under the engine lock."""
        target = self.engine.target
        parked = self._parking.take(target, prompt_ids)
        if parked is None:
            return
        self._parking.park(target, self._fixed_prefix, self._piece_starts, self._pieces_of)
        if parking.put_back(target, parked):
            self._piece_starts, self._pieces_of = parked.piece_starts, parked.pieces_of
        else:  # refused, and the cache is empty: the shared prefix goes back first, as at the start
            self._warm()

    def _check(
        self, prepared: _Prepared, options: AnswerOptions, started: float, retrieval_s: float
    ) -> Generator[Event, None, _Warm | None]:
        """Ask the target whether the passages answer the question (gate.py), under the engine lock, and
        record its verdict in `prepared.relevance`. A "no" refuses (returns None) or, with `--gate warn`,
        warns. Otherwise returns what the answer's prefill is spared: the shared prompt prefix, and the
        judge prompt, which the answer's shares up to its closing line."""
        yield Status("checking", ("" if prepared.relevance.close else WEAK_MATCH) + CHECKING)
        warm = self._warm_once()
        start = time.perf_counter()
        log_odds, computed = self._judge_log_odds(prepared)
        prepared.relevance = prepared.relevance.with_judgement(log_odds)
        judge_s = time.perf_counter() - start
        warm = _Warm(warm.prefilled_tokens + computed, warm.seconds + judge_s)
        if not prepared.relevance.covered:
            reading = prepared.relevance.to_dict()
            if options.gate == "refuse":
                yield Status("checking", "the sources do not cover this question", {"relevance": reading})
                yield from self._refuse(prepared, started, retrieval_s, judge_s)
                return None
            yield Status("checking", f"warning: {gate.weak_match_warning(reading)}", {"relevance": reading})
        return warm

    def _judge_log_odds(self, prepared: _Prepared) -> tuple[float, int]:
        """The target's log-odds of "Yes" over "No" opening its reply to the judge prompt, and how many
        prompt tokens it computed for them. Under the engine lock, after warming."""
        engine = self.engine
        tokens = gate.judge_tokens(engine.tokenizer)
        if tokens is None:
            raise SpecragError("this model's tokenizer does not tell Yes from No: it cannot judge relevance")
        ids = self._judge_prompt_ids(prepared)
        self._in_fixed_pieces(ids)
        before = self._before_closing(ids, prepared.prompt_ids)
        logprob_yes, logprob_no = engine.next_token_logprobs(ids, tokens)
        return logprob_yes - logprob_no, before.prefilled_tokens + len(ids) - engine.target.reused

    def _judge_prompt_ids(self, prepared: _Prepared) -> list[int]:
        """The judge's prompt: the answer's, closing with JUDGE_QUESTION instead of the reminder."""
        question, passages, history = prepared.question, prepared.new_passages, prepared.history_messages
        return encode_prompt(self.engine.tokenizer, build_messages(question, passages, history, JUDGE_QUESTION))

    def _before_closing(self, prompt_ids: list[int], other_ids: list[int]) -> _Warm:
        """Compute `prompt_ids` up to where they part from `other_ids` (the answer's and the judge's prompts part at
        their closing line), as a piece of its own. Every answer's prompt is then computed in the same pieces,
        judged or not: on llamacpp-f16 logits depend on how a prompt is split into passes, and a judged answer went
        on from the judge's prompt while an unjudged one was computed whole, so whether the judge was asked (a
        yes-or-no question, `--gate off`, another target) changed answers where two tokens were near a tie (session
        49: 28 of the 61 own Slurm answers moved when the veto had every question judged). Under the engine lock,
        after `_in_fixed_pieces`."""
        target = self.engine.target
        parting = common_prefix_length(prompt_ids, other_ids)
        if parting >= len(prompt_ids) - 1 or target.snapshot_prefix(prompt_ids) >= parting:
            return _Warm()  # no closing line to part at (no passages), or computed already
        start = time.perf_counter()
        target.prefill(prompt_ids[:parting])
        return _Warm(parting - target.reused, time.perf_counter() - start)

    def judge(
        self,
        question: str,
        passages: Sequence[Passage],
        options: AnswerOptions | None = None,
        history: Sequence[Turn] = (),
        searched_alone: bool = False,
        places: int | None = None,
        further: Sequence[Sequence[Passage]] = (),
    ) -> float:
        """The relevance gate's judge on a question and its passages, alone (gate_calibration --judge) or after
        `history` with the prompt `answer` would build (bench_follow_up_gate --judge-all: with `places` and the
        `further` rankings it gives)."""
        options = options or self.options.answer
        question = checked_question(question)
        prepared = self._prepare(question, list(history), list(passages), options, searched_alone, places, further)
        with self._engine_lock:
            self._warm_once()
            return self._judge_log_odds(prepared)[0]

    def _refuse(self, prepared: _Prepared, started: float, retrieval_s: float, judge_s: float = 0.0) -> Iterator[Event]:
        """The gate's answer: no answer is generated (the judge may have run: `judge_s`); the nearest sources
        are listed."""
        text = gate.refusal_text(prepared.nearest, prepared.question)
        stats = {
            "new_tokens": 0,
            "retrieval_s": round(retrieval_s, 4),
            **({"judge_s": round(judge_s, 4)} if judge_s else {}),
            "elapsed_s": round(time.perf_counter() - started, 4),
        }
        yield Token(text, [], [], stats)
        # the refusal lists the nearest sources as [n], but cites none of them
        citations = cite.no_citations(prepared.all_passages)
        yield Final(
            question=prepared.question,
            answer=text,
            finish_reason="gated",
            passages=prepared.all_passages,
            sources=cite.source_list(prepared.nearest, citations),
            citations=citations,
            grounding=[],
            stats=stats,
            prompt_ids=[],
            output_ids=[],
            origins=[],
            turn=Turn(prepared.question, text, (), refused=True, kept_earlier_bare=prepared.kept_earlier_bare),
            models=self.loaded.describe() if self.loaded else {},
            relevance=prepared.relevance.to_dict() if prepared.relevance else None,
            gated=True,
            # a value's band in a listed source's thresholds is the source's, not an answer: still shown
            definitions=thresholds(prepared.question, prepared.nearest),
        )

    def _prepare(
        self,
        question: str,
        history: list[Turn],
        candidates: list[Passage],
        options: AnswerOptions,
        searched_alone: bool = False,
        places: int | None = None,
        further: Sequence[Sequence[Passage]] = (),
    ) -> _Prepared:
        """Keep the history that fits, number the passages (at most `places` new ones, the `further` rankings'
        after the candidates': conversation.number_new_passages), trim them to the context budget."""
        tokenizer = self.engine.tokenizer

        def count(messages: list[dict[str, str]]) -> int:
            return len(encode_prompt(tokenizer, messages))

        kept = keep_history(history, options.history_tokens, count, whole=not searched_alone)
        new = number_new_passages(candidates, kept.passages, places, further)
        limit = self.engine.context_limit - options.max_new_tokens
        notes: dict[str, Any] = {"history_turns": kept.turns}
        while True:
            prompt_ids = encode_prompt(tokenizer, build_messages(question, new, kept.messages))
            if len(prompt_ids) <= limit:
                break
            if new:
                new = new[:-1]
                notes["trimmed_passages"] = notes.get("trimmed_passages", 0) + 1
            elif kept.messages:
                kept = keep_history([], 0, count)
                notes["history_dropped"] = True
            else:
                raise ContextBudgetError(
                    f"the question is {len(prompt_ids)} tokens; with room for a {options.max_new_tokens}-token answer "
                    f"it exceeds the model's context of {self.engine.context_limit} tokens: shorten the question or "
                    "lower max_new_tokens"
                )
        return _Prepared(
            question,
            history,
            kept.passages,
            new,
            kept.answers,
            prompt_ids,
            notes,
            kept.messages,
            searched_alone,
            pages=self.tool_pages(),
            nearest=nearest_passages(candidates, kept.passages, new),
        )

    def _generate(
        self, prepared: _Prepared, options: AnswerOptions, started: float, retrieval_s: float, warm: _Warm
    ) -> Iterator[Event]:
        engine = self.engine
        copy_texts = [p.text for p in prepared.all_passages] + prepared.answers
        labels = [f"passage:{p.number}" for p in prepared.all_passages] + [
            f"answer:{i + 1}" for i in range(len(prepared.answers))
        ]
        chunk_ids = encode_chunks(engine.tokenizer, copy_texts)
        config = self.generation_config(options)
        config = replace(config, stop_strings=(*config.stop_strings, past_the_sources(prepared.all_passages)))
        shown = [shown_text(p) for p in prepared.all_passages]
        # the shown text stops short of a contact still forming, and at an invented one (withhold.py)
        guard = ContactGuard(shown, prepared.asked, prepared.all_passages, prepared.question)
        # nothing streams before the answer cites a passage; one that never does (unless it quotes one passage
        # throughout: shown citing it), or writes the prompt's [n] placeholder as a value, is withheld (withhold.py)
        passages = prepared.all_passages
        cited = CitationGuard([p.number for p in passages] if options.withhold_uncited else [], _texts(passages))
        code = (
            CopiedCode(engine.tokenizer, shown, prepared.asked, prepared.pages.commands)
            if options.code_from_sources
            else None
        )
        text, ids, origins, first_token_s, event = [], [], [], None, None
        stream = engine.generate(prepared.prompt_ids, chunk_ids, config, code)
        try:
            for event in stream:
                if first_token_s is None:
                    first_token_s = time.perf_counter() - started
                    prefill_s = round(event.stats.prefill_s + warm.seconds, 3)
                    yield Status("generating", "generating…", {"prefill_s": prefill_s})
                new_origins = [_label(o, labels) for o in event.origins]
                text.append(event.text)
                ids += event.token_ids
                origins += new_origins
                stats = self._stats(event.stats, origins, started, warm)
                yield Token(cited.feed(guard.feed(event.text)), list(event.token_ids), new_origins, stats)
                if guard.tripped or cited.notice or cited.unnumbered:
                    break  # the answer is withheld, or ends where it cited by [n]: the rest would never be shown
        finally:
            stream.close()
        stats = self._stats(event.stats, origins, started, warm) | {
            "retrieval_s": round(retrieval_s, 4),
            "time_to_first_token_s": round(first_token_s or 0.0, 4),
            "speculation": config.speculation,
            "code_steered": code.steered if code is not None else None,
            "code_left_alone": code.left_alone if code is not None else None,
            "code_finished": code.finished if code is not None else None,
        }
        rest = cited.feed(guard.flush()) + cited.flush()
        if rest:
            yield Token(rest, [], [], stats)
        # an own-site answer is withheld once it has ended (guard.notice, not tripped): it was not stopped
        finish = "withheld" if guard.tripped or cited.tripped else event.finish_reason or "length"
        if finish == "stop" and not options.stop:
            finish = "past_sources"  # the one stop string of our own
        if cited.unnumbered:
            finish = "unnumbered"
        tokenizer, models = self.engine.tokenizer, self.loaded.describe() if self.loaded else {}
        yield _checked_final(
            prepared,
            "".join(text),
            ids,
            origins,
            finish,
            stats,
            lambda t: tokenizer.decode(t, skip_special_tokens=True),
            models,
            cited.notice,
            cited.added,
        )

    def generation_config(self, options: AnswerOptions) -> GenerationConfig:
        from generation.engine import GenerationConfig
        from generation.sampling import SamplingParams

        speculation = options.speculation
        if not self.engine.verifies_drafts:
            speculation = "none"  # the path decodes plainly (llamacpp-f16): say so
        elif speculation in ("model", "hybrid") and self.engine.draft is None:
            speculation = "ngram"  # no draft model loaded: copies only
        try:
            sampling = SamplingParams(options.temperature, options.top_p, options.top_k)
        except ValueError as err:
            raise SpecragError(str(err)) from err
        return GenerationConfig(
            max_new_tokens=options.max_new_tokens,
            sampling=sampling,
            stop_strings=tuple(options.stop),
            seed=options.seed,
            speculation=speculation,
            repeat_span=options.repeat_span,
        )

    @staticmethod
    def _stats(stats: Any, origins: list[str], started: float, warm: _Warm) -> dict[str, Any]:
        copied = sum(o.startswith(("passage:", "answer:")) for o in origins)
        engine_stats = stats.to_dict()
        return engine_stats | {
            "prefilled_tokens": engine_stats["prefilled_tokens"] + warm.prefilled_tokens,
            "prefill_s": round(engine_stats["prefill_s"] + warm.seconds, 4),
            "copied_share": round(copied / len(origins), 4) if origins else 0.0,
            "elapsed_s": round(time.perf_counter() - started, 4),
        }


def import_shared_modules() -> None:
    """Import, in this thread, the transformers modules that both the index's query embedder and the models load.

    transformers' lazy modules are not safe to import from two threads at once: on the `int4` path, where this
    thread loads the target through transformers while the index opens in another, the chat's start once failed
    with "cannot import name 'AutoModel' from 'transformers'" in the index thread (session 61, an AMX Xeon). They
    cost ~1.6 s to import once, which the index thread would otherwise spend."""
    from transformers import AutoModel, AutoTokenizer  # noqa: F401


def past_the_sources(passages: Sequence[Passage]) -> str:
    """The stop string for a line that opens with the source number after the last one: `\n[7]` of six.

    A small model that has run out of answer numbers its paragraphs with source markers and goes on
    past the sources: a list of steps [1] .. [9] that repeats `scontrol takeover` for "is the controller
    up?" (fresh7 `s7-06`), the sources' titles [3] .. [11] for the on-call question (`slurm-059`). Of
    the 329 distinct eval answers saved in sessions 44-48, 7 open a line with the number after the last
    source, each in such a list: 3 went on until the repetition guard stopped them, 3 until the length
    limit, 1 ended there. Generation stops at that line, as at any stop string, so speculative output
    stays plain decoding's, only shorter.
    """
    return f"\n[{max((p.number for p in passages), default=0) + 1}]"


CONTEXT_STEP = 256  # llama.cpp sizes a KV cache in steps of 256 cells


def final_from_text(
    question: str,
    passages: Sequence[Passage],
    answer: str,
    finish: str,
    withheld: str = "",
    history: Sequence[Turn] = (),
    pages: ToolPages | None = None,
    copies: cite.Copies | None = None,
) -> Final:
    """The Final that `answer`, written for `question` (after the turns of `history`) over `passages` and ended
    for `finish`, gets from the pipeline's checks, without a model: what `app.eval.rescore` scores saved answers
    with. Provenance is by text alone, or from `copies`, the drafter's copied spans and tokens per passage the
    answer's live `Citations` recorded; `withheld`, a CitationGuard notice the answer was stopped with; `pages`,
    what the index's tool pages say (tool_pages.py)."""
    prepared = _Prepared(question, list(history), [], list(passages), [], [], {}, pages=pages or ToolPages())
    added = quoted_source(answer, _texts(passages)) if withheld == UNCITED else None  # as CitationGuard decides
    notice = "" if added is not None else withheld
    return _checked_final(prepared, answer, [], [], finish, {}, lambda ids: "", {}, notice, added, copies)


def _texts(passages: Sequence[Passage]) -> dict[int, str]:
    return {p.number: p.text for p in passages}


def _checked_final(
    prepared: _Prepared,
    answer: str,
    ids: list[int],
    origins: list[str],
    finish: str,
    stats: dict,
    decode: Callable[[Sequence[int]], str],
    models: dict[str, Any],
    cited_notice: str = "",
    added: int | None = None,
    copies: cite.Copies | None = None,
) -> Final:
    """The answer's Final: what the user is shown of it, its citations, grounding, quotes and recitations.
    `added`: the passage an uncited answer quotes in every sentence, shown opening it (withhold.py)."""
    passages = prepared.all_passages
    citations = cite.build_citations(answer, ids, origins, passages, decode, copies)
    read = [shown_text(p) for p in passages]  # the passages as the model read them
    displayed, left_out = without_copied(shown_answer(answer, finish), read, prepared.question)  # as Final.shown
    written = displayed  # the conversation goes on with the model's own markers: its KV cache holds them
    earlier = [turn.answer for turn in prepared.history]
    said = said_before(displayed, earlier)  # the operator read them above
    displayed = without_sentences(displayed, said)
    if added is not None:
        displayed = f"[{added}] {displayed}"
    if displayed != answer:  # the markers, sources marked cited and provenance are those of what the user reads
        citations = cite.of_shown_text(citations, displayed, passages)
    numbers = [p.number for p in passages]
    # a left-out sentence's items are not the user's to check: they never see it; nor are those of a restart a
    # repetition stop cut short (`SLURM_RESTART` of "[6] ... `SLURM_RESTART", after the whole sentence twice)
    checked_text = without_sentences(shown_answer(answer, finish), [*(sentence for sentence, _ in left_out), *said])
    grounding = check_grounding(checked_text, read, prepared.asked, numbers, prepared.pages.commands)
    checked = with_example_words(with_tools(grounding, passages, checked_text), read, prepared.asked)
    texts = _texts(passages)
    recited, recitations = recite(displayed, citations.segments, checked, texts)
    if added is not None:  # said like a moved marker: the front ends note it, the eval counts it
        recitations = [Recitation((), added, first_sentence(prose(answer))), *recitations]
    if recitations:  # shown citing the sources its sentences quote
        displayed, citations = recited, cite.of_shown_text(citations, recited, passages)
    grounding = attribute(displayed, checked)
    notice = (
        withheld_notice(grounding)
        or UnsourcedSubjectCheck(read, prepared.question).notice(answer)
        or example_credential_notice(answer, read)
        or own_site_notice(prepared.question, answer, grounding)
        or misattributed_notice(answer, passages, prepared.question)
        or cited_notice
    )
    # the sources list marks what the shown text cites: nothing, when the answer is withheld
    listed = cite.no_citations(passages) if notice else citations
    used = {*listed.valid, *listed.copied}
    shown = [p for p in passages if p in prepared.new_passages or p.number in used]
    if notice and not shown:  # a follow-up that found only earlier turns' passages: the notice points at them
        shown = list(passages)
    kept_passages = () if notice else tuple(prepared.new_passages)
    return Final(
        question=prepared.question,
        answer=answer,
        finish_reason=finish,
        passages=passages,
        sources=cite.source_list(shown, listed),
        citations=citations,
        grounding=grounding,
        stats=stats,
        prompt_ids=prepared.prompt_ids,
        output_ids=ids,
        origins=origins,
        # a withheld answer goes on in the conversation as its notice, so no follow-up builds on the invention;
        # without its passages, as a gated turn: the next question's sources are numbered from [1] again,
        # where the model's habit of opening with [1] points (it had cited an earlier turn's [1] otherwise)
        turn=Turn(prepared.question, notice or written, kept_passages, bool(notice), prepared.kept_earlier_bare),
        models=models,
        relevance=prepared.relevance.to_dict() if prepared.relevance else None,
        withheld=notice,
        quotes=[] if notice else judge_quotes(citations.segments, texts),
        recitations=[] if notice else recitations,
        recited=displayed if recitations and not notice else "",
        borrowed=[] if notice else borrowed_sentences(displayed, read, prepared.question),
        left_out=[] if notice else left_out,
        said_before=[] if notice else said,
        definitions=[]
        if notice
        else [
            *thresholds(prepared.question, passages),
            *neighbour_quotes(displayed, passages, prepared.question),
            *swapped_subjects(displayed, passages),
            *defined_options(
                grounding,
                passages,
                displayed,
                prepared.question,
                prepared.pages.options,
                prepared.pages.sections,
                prepared.pages.names,
            ),
        ],
        spliced=[] if notice else spliced_sentences(displayed, passages),
        miscompared=[] if notice else wrong_comparisons(displayed),
        example_facts=[] if notice else example_facts(displayed, passages, prepared.asked),
        cut_code=None if notice else cut_code(answer, finish, passages, displayed),
        misplaced=[] if notice else misplaced_settings(displayed, prepared.pages.settings, passages),
        unlisted=[] if notice else unlisted_values(grounding, passages, prepared.pages.options),
        repeats_earlier=not notice and repeats_earlier_answer(answer, earlier),
    )


@dataclass(frozen=True)
class _Warm:
    """What warming the shared prompt prefix cost the answer that did it (nothing for later answers)."""

    prefilled_tokens: int = 0
    seconds: float = 0.0

    def __add__(self, other: _Warm) -> _Warm:
        return _Warm(self.prefilled_tokens + other.prefilled_tokens, self.seconds + other.seconds)


@dataclass
class _Prepared:
    question: str
    history: list[Turn]
    kept_passages: list[Passage]  # from turns kept whole, citable by their old numbers
    new_passages: list[Passage]
    answers: list[str]  # earlier answers, copy sources for the n-gram drafter
    prompt_ids: list[int]
    notes: dict[str, Any]
    history_messages: list[dict[str, str]] = field(default_factory=list)  # the kept turns, as the prompt has them
    kept_earlier_bare: bool = False  # searched alone after earlier turns: the prompt keeps them bare
    relevance: gate.Relevance | None = None
    pages: ToolPages = field(default_factory=ToolPages)  # each tool's commands and options (tool_pages.py)
    # what a refusal lists: the search's passages in its order, those a kept turn holds under their numbers
    # (conversation.nearest_passages)
    nearest: list[Passage] = field(default_factory=list)

    @property
    def all_passages(self) -> list[Passage]:
        return [*self.kept_passages, *self.new_passages]

    @property
    def asked(self) -> str:
        """The conversation's questions, this one last: the user's own values (a node, a job id, "2 hours")
        are theirs in a follow-up too. Asked to put back the node c117 drained a turn before, "and once it's
        fixed, how do I put it back?" got a source's `scontrol update NodeName=name State=RESUME` with c117 in,
        and the check flagged it as not in the sources, as only the question it answered could name c117."""
        return "\n".join([*(turn.question for turn in self.history), self.question])


def _dense(hit: Any) -> float | None:
    scores = getattr(hit, "scores", None) or {}
    return round(float(scores["dense"]), 6) if "dense" in scores else None


def _label(origin: Origin, labels: list[str]) -> str:
    """An engine origin as a pipeline label: chunk i -> "passage:N" or "answer:T"."""
    if origin.kind == "chunk" and origin.chunk is not None and origin.chunk < len(labels):
        return labels[origin.chunk]
    return origin.kind


def collect(events: Iterator[Event], on_event: Callable[[Event], None] | None = None) -> Final:
    """Drain a stream (calling `on_event` for each event) and return its Final."""
    final = None
    for event in events:
        if on_event is not None:
            on_event(event)
        if isinstance(event, Final):
            final = event
    if final is None:
        raise SpecragError("the answer stream ended without a final event")
    return final
