"""The engine against its reference: plain target decoding through the same loop."""

import itertools
import random

import pytest
import torch
from scipy.stats import chisquare

from generation.drafters.base import Origin
from generation.drafters.policy import PassCost
from generation.engine import Engine, GenerationConfig
from generation.errors import SpecragError
from generation.sampling import SamplingParams, logits_to_probs

ALPHA = 1e-4  # each chi-square test here fails falsely with probability 1e-4

MODES = [
    dict(speculation="ngram"),
    dict(speculation="model"),
    dict(speculation="hybrid"),
    dict(speculation="ngram", draft_length=5),
    dict(speculation="model", draft_length=4, min_draft_confidence=0.0),
    dict(speculation="hybrid", draft_length=6, min_draft_confidence=0.0),
]


@pytest.fixture
def engine(target, draft, tokenizer):
    return Engine(target, tokenizer, draft)


def random_prompt(rng: random.Random, length: int) -> list[int]:
    # a few repeated motifs so n-gram lookups find matches
    motifs = [[rng.randrange(256) for _ in range(rng.randint(3, 8))] for _ in range(4)]
    ids: list[int] = []
    while len(ids) < length:
        ids += rng.choice(motifs) if rng.random() < 0.6 else [rng.randrange(256)]
    return ids[:length]


def plain(engine, prompt, chunks=(), **kw):
    return engine.complete(prompt, chunks, GenerationConfig(speculation="none", **kw))


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(f"{v}" for v in m.values()))
def test_greedy_speculative_output_equals_plain_greedy(engine, mode):
    rng = random.Random(7)
    drafted = accepted = 0
    for _ in range(12):
        prompt = random_prompt(rng, rng.randint(5, 60))
        chunks = [random_prompt(rng, 30), prompt[rng.randrange(len(prompt)) :]]
        reference = plain(engine, prompt, chunks, max_new_tokens=40)
        result = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=40, **mode))
        assert result.token_ids == reference.token_ids
        assert result.text == reference.text
        drafted += sum(result.stats.drafted.values())
        accepted += sum(result.stats.accepted.values())
    if "draft_length" in mode:  # fixed-length modes must really exercise acceptance and rejection
        assert 0 < accepted < drafted


def test_plain_decoding_is_one_token_per_pass(engine):
    result = plain(engine, [1, 2, 3, 4], max_new_tokens=25)
    assert result.stats.target_passes == result.stats.new_tokens == 25
    assert result.stats.tokens_per_pass == 1.0
    assert all(o == Origin("target") for o in result.origins)


def test_draft_equal_to_target_gives_full_acceptance(target, tokenizer):
    engine = Engine(target, tokenizer, draft=target)
    config = GenerationConfig(max_new_tokens=30, speculation="model", draft_length=4, min_draft_confidence=0.0)
    result = engine.complete([5, 6, 7, 8, 9], (), config)
    assert result.stats.acceptance_rate == 1.0
    assert result.stats.tokens_per_pass == pytest.approx(30 / result.stats.target_passes)
    assert result.stats.target_passes <= 30 // 5 + 1  # 4 drafted + 1 bonus per pass


def copy_of_the_answer(engine, prompt, n):
    """A chunk holding exactly what plain decoding will say next, so copies are all accepted."""
    return plain(engine, prompt, max_new_tokens=n).token_ids


def test_eos_inside_an_accepted_draft_ends_the_answer(target, tokenizer):
    engine = Engine(target, tokenizer, eos_token_ids=[])
    prompt = [10, 20, 30, 40]
    answer = copy_of_the_answer(engine, prompt, 30)
    first = next(i for i in range(3, len(answer)) if answer[i] not in answer[:i])
    eos = answer[first]
    engine.eos = {eos}
    config = GenerationConfig(max_new_tokens=30, speculation="ngram", draft_length=16)
    result = engine.complete(prompt + answer[:1], [answer], config)
    expected = answer[1 : first + 1]
    assert result.token_ids == expected and result.finish_reason == "eos"
    assert result.stats.target_passes == 1  # the whole answer came in one accepted draft


def test_max_new_tokens_cuts_in_the_middle_of_a_draft(target, tokenizer):
    engine = Engine(target, tokenizer, eos_token_ids=[])
    prompt = [11, 22, 33]
    answer = copy_of_the_answer(engine, prompt, 40)
    config = GenerationConfig(max_new_tokens=7, speculation="ngram", draft_length=16)
    result = engine.complete(prompt + answer[:2], [answer], config)
    assert result.token_ids == answer[2:9]
    assert result.finish_reason == "length" and result.stats.new_tokens == 7


def test_no_ngram_match_falls_back_to_plain_steps(engine):
    prompt = [1, 2, 3, 4, 5]
    unrelated = [[200, 201, 202, 203]]
    reference = plain(engine, prompt, max_new_tokens=20)
    engine_ngram_only = GenerationConfig(max_new_tokens=20, speculation="ngram", draft_length=4)
    result = engine.complete(prompt, unrelated, engine_ngram_only)
    assert result.token_ids == reference.token_ids
    assert all(o.kind in ("target", "context") for o in result.origins)


def test_copied_tokens_carry_their_chunk_and_offset(target, tokenizer):
    engine = Engine(target, tokenizer, eos_token_ids=[])
    prompt = [7, 8, 9]
    answer = copy_of_the_answer(engine, prompt, 12)
    chunk = [99, 98, *answer]
    result = engine.complete(
        prompt + answer[:3], [[1, 1], chunk], GenerationConfig(max_new_tokens=5, speculation="ngram", draft_length=8)
    )
    copied = [o for o in result.origins if o.kind == "chunk"]
    assert copied and all(o.chunk == 1 for o in copied)
    assert copied[0].offset == 2 + 3  # first copied token sits right after the matched prefix


def test_stop_string_ends_the_answer_without_emitting_it(engine, tokenizer):
    prompt = tokenizer.encode("abc abc abc")
    reference = plain(engine, prompt, max_new_tokens=40)
    stop = reference.text[10:12]
    result = engine.complete(
        prompt, (), GenerationConfig(max_new_tokens=40, speculation="hybrid", stop_strings=(stop,))
    )
    assert result.finish_reason == "stop"
    assert result.text == reference.text[: reference.text.index(stop)]


def test_same_seed_same_sample_different_seed_differs(engine):
    # reproducible with a fixed draft length; the adaptive length depends on measured timings
    prompt = [3, 1, 4, 1, 5]
    sampling = SamplingParams(temperature=1.5)
    runs = [
        engine.complete(
            prompt,
            (),
            GenerationConfig(max_new_tokens=20, sampling=sampling, seed=s, draft_length=3, speculation="hybrid"),
        ).token_ids
        for s in (1, 1, 2)
    ]
    assert runs[0] == runs[1] != runs[2]


def exact_pair_distribution(model, prompt, params):
    """Exact probability of every (t1, t2) continuation under the target."""
    with torch.no_grad():
        p1 = logits_to_probs(model(torch.tensor([prompt])).logits[0, -1], params)
        pairs = {}
        for t1 in torch.nonzero(p1).flatten().tolist():
            p2 = logits_to_probs(model(torch.tensor([[*prompt, t1]])).logits[0, -1], params)
            for t2 in torch.nonzero(p2).flatten().tolist():
                pairs[(t1, t2)] = float(p1[t1] * p2[t2])
    return pairs


@pytest.mark.parametrize("speculation", ["model", "ngram"])
def test_sampled_two_token_distribution_matches_the_target(target, draft, tokenizer, speculation):
    params = SamplingParams(temperature=2.0, top_k=3)  # 9 possible pairs, none too rare
    prompt = [40, 41, 42, 40, 41]
    expected = exact_pair_distribution(target, prompt, params)
    engine = Engine(target, tokenizer, draft, eos_token_ids=[])
    # point-mass drafts: the chunk proposes each of the likely continuations in turn
    chunks = [[40, 41, t1, t2] for t1, t2 in expected][:3]
    n = 1500
    counts = dict.fromkeys(expected, 0)
    for seed in range(n):
        config = GenerationConfig(
            max_new_tokens=2,
            sampling=params,
            seed=seed,
            speculation=speculation,
            draft_length=2,
            min_draft_confidence=0.0,
        )
        out = engine.complete(prompt, chunks, config).token_ids
        counts[tuple(out)] += 1
    keys = sorted(expected)
    observed = [counts[k] for k in keys]
    total = sum(expected.values())
    expect = [expected[k] / total * n for k in keys]
    assert chisquare(observed, expect).pvalue > ALPHA


def test_modes_needing_a_draft_model_refuse_without_one(target, tokenizer):
    engine = Engine(target, tokenizer)
    with pytest.raises(SpecragError, match="draft model"):
        engine.complete([1, 2], (), GenerationConfig(speculation="model"))


def test_bad_config_and_empty_prompt_are_clear_errors(engine):
    with pytest.raises(SpecragError, match="speculation mode"):
        GenerationConfig(speculation="turbo")
    with pytest.raises(SpecragError, match="max_new_tokens"):
        GenerationConfig(max_new_tokens=0)
    with pytest.raises(SpecragError, match="empty"):
        engine.complete([], (), GenerationConfig())


@pytest.mark.parametrize("speculation", ["model", "hybrid"])
def test_the_first_token_waits_for_the_target_prefill_only(engine, speculation):
    """The draft model is prefilled after the first target pass, so the first token never waits for it."""
    engine.draft_record.prefill_token_seconds = 1e-12  # a free prefill: hybrid takes the model in at once
    prompt = random_prompt(random.Random(3), 200)
    draft_positions = []
    stream = engine.generate(prompt, [prompt[50:90]], GenerationConfig(speculation=speculation, max_new_tokens=30))
    for _event in stream:
        draft_positions.append(engine.draft.length)
    assert draft_positions[0] == 0  # nothing of the prompt in the draft's cache when the first token is out
    assert max(draft_positions) >= len(prompt) - 1  # and it was prefilled afterwards
    reference = plain(engine, prompt, [prompt[50:90]], max_new_tokens=30)
    result = engine.complete(prompt, [prompt[50:90]], GenerationConfig(speculation=speculation, max_new_tokens=30))
    assert result.token_ids == reference.token_ids


def test_a_prompt_extending_the_last_one_prefills_only_its_new_tokens(engine):
    prompt = random_prompt(random.Random(5), 80)
    first = plain(engine, prompt, max_new_tokens=8)
    assert first.stats.prefilled_tokens == len(prompt) - 1
    follow_up = [*prompt, *first.token_ids, 7, 8, 9]
    second = plain(engine, follow_up, max_new_tokens=8)
    # the snapshot holds prompt[:-1]; the rest of the old prompt, the answer and the new turn are computed
    assert second.stats.prefilled_tokens == len(follow_up) - 1 - (len(prompt) - 1)
    assert (
        second.token_ids
        == Engine(engine.target.model, engine.tokenizer)
        .complete(follow_up, (), GenerationConfig(speculation="none", max_new_tokens=8))
        .token_ids
    )  # reuse changes nothing in the answer


def test_next_token_logprobs_read_the_last_row_and_leave_the_prompt_for_the_answer(engine):
    prompt = random_prompt(random.Random(9), 60)
    with torch.inference_mode():
        full = engine.target.model(input_ids=torch.tensor([prompt])).logits[0, -1].float().log_softmax(-1)
    scored = engine.next_token_logprobs(prompt, (3, 5))
    assert scored == pytest.approx([float(full[3]), float(full[5])], abs=1e-4)
    assert engine.next_token_logprobs(prompt, (3, 5)) == pytest.approx(scored, abs=1e-5)  # now wholly cached
    answer = plain(engine, [*prompt[:50], 1, 2, 3], max_new_tokens=2)
    assert answer.stats.prefilled_tokens == 2  # the judged prompt's first 50 tokens were reused
    with pytest.raises(SpecragError, match="empty"):
        engine.next_token_logprobs([], (3,))


def test_draft_model_reads_its_cached_prefix_plus_the_prompts_tail(engine):
    """With draft_context, later answers cost the draft model only that many prompt tokens, output unchanged."""
    rng = random.Random(11)
    prefix = random_prompt(rng, 40)
    config = GenerationConfig(
        speculation="model", max_new_tokens=30, draft_context=12, draft_length=4, min_draft_confidence=0.0
    )
    first_prompt = prefix + random_prompt(rng, 150)
    first = engine.complete(first_prompt, (), config)
    assert first.stats.draft_prefilled_tokens == len(first_prompt) - 1  # nothing cached yet: the whole prompt
    for _ in range(3):
        prompt = prefix + random_prompt(rng, rng.randint(100, 200))
        result = engine.complete(prompt, (), config)
        assert result.stats.draft_prefilled_tokens == 12  # the prefix came from the cache
        assert result.stats.draft_prefill_s > 0
        assert result.token_ids == plain(engine, prompt, max_new_tokens=30).token_ids
        assert sum(result.stats.drafted.values()) > 0


def test_draft_context_must_be_positive():
    with pytest.raises(SpecragError, match="draft_context"):
        GenerationConfig(draft_context=0)


def test_hybrid_takes_the_draft_model_in_only_once_its_prefill_has_paid(engine):
    """The draft's prefill is paid up front; hybrid starts it once tokens emitted x saving per token cover it."""
    prompt = random_prompt(random.Random(4), 200)
    reference = plain(engine, prompt, max_new_tokens=40)
    # a flat pass cost: whether a model draft pays no longer rides on the tiny models' timing noise
    engine.cost = PassCost({n: 1.0 for n in (1, 2, 4, 8, 16)})
    engine.draft_record.prefill_token_seconds = 1e3  # a prefill no answer can pay back
    costly = engine.complete(prompt, (), GenerationConfig(speculation="hybrid", max_new_tokens=40))
    assert costly.stats.draft_prefilled_tokens == 0 and costly.stats.drafted["model"] == 0
    engine.draft_record.prefill_token_seconds = 1e-12
    engine.draft_record.step_seconds = 1e-9  # its first draft is near free; later ones are timed
    free = engine.complete(prompt, (), GenerationConfig(speculation="hybrid", max_new_tokens=40))
    assert free.stats.draft_prefilled_tokens > 0 and free.stats.drafted["model"] > 0
    assert costly.token_ids == free.token_ids == reference.token_ids
    assert engine.draft_record.step_seconds > 1e-9  # measured, for the next answer


class NoRisingStep:
    """A prefix-dependent rule: the answer never takes the token one above its last one (nor the first
    unfiltered answer's second token), so each row of a pass gets its own mask."""

    def __init__(self, banned_first: int) -> None:
        self.banned_first = banned_first
        self.rows = 0

    def restrict(self, answer_ids, logits, greedy):
        self.rows += 1
        banned = [answer_ids[-1] + 1] if answer_ids else [self.banned_first]
        row = logits.clone()
        row[[b for b in banned if b < row.shape[0]]] = float("-inf")
        return row


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(f"{v}" for v in m.values()))
def test_a_token_filter_applies_to_plain_and_speculative_rows_alike(engine, mode):
    rng = random.Random(11)
    changed = 0
    for _ in range(6):
        prompt = random_prompt(rng, rng.randint(5, 60))
        chunks = [random_prompt(rng, 30), prompt[rng.randrange(len(prompt)) :]]
        free = plain(engine, prompt, chunks, max_new_tokens=30).token_ids
        rule = NoRisingStep(banned_first=free[0])
        reference = engine.complete(prompt, chunks, GenerationConfig(speculation="none", max_new_tokens=30), None, rule)
        result = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=30, **mode), None, rule)
        assert result.token_ids == reference.token_ids
        ids = reference.token_ids
        assert ids[0] != free[0] and all(b != a + 1 for a, b in itertools.pairwise(ids))
        changed += ids != free
        assert rule.rows >= 2 * len(ids) - 1  # every row of every pass went through it (plain: one per token)
    assert changed == 6
