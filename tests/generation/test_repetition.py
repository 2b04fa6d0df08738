"""The loop guard: stops at the run that comes round for the limit-th time, the same token in every mode."""

import random

import pytest
from test_engine import MODES, plain, random_prompt

from generation.engine import Engine, GenerationConfig
from generation.errors import SpecragError
from generation.repetition import NUMERAL, RepetitionGuard, numeral_classes
from tests.generation.tiny import byte_tokenizer


def first_stop(tokens, span, limit, classes=None):
    guard = RepetitionGuard(span, limit, classes)
    return next((i for i, t in enumerate(tokens) if guard.push(t)), None)


def test_a_sentence_said_three_times_stops_inside_the_third():
    sentence = list(range(100, 130))  # 30 tokens
    answer = [1, 2, 3] + sentence * 4
    stop = first_stop(answer, span=16, limit=3)
    assert stop == 3 + 2 * 30 + 15  # the third time its first 16 tokens are complete


def test_runs_that_differ_in_one_token_are_different_runs():
    # "[8] Use X ... [9] Use X ...": a loop whose only change is a number still repeats its longer part
    numbered = [t for n in range(20) for t in (500 + n, *range(10, 30))]
    assert first_stop(numbered, span=16, limit=3) is not None
    # a list whose every line differs somewhere in each 16-token window never stops
    lines = [t for n in range(20) for t in (*range(10, 18), 500 + n, *range(40, 47))]
    assert first_stop(lines, span=16, limit=3) is None


def test_a_counting_loop_stops_when_numerals_count_as_one_token():
    tokenizer = byte_tokenizer()
    classes = numeral_classes(tokenizer)
    assert sorted(classes) == sorted(tokenizer.convert_tokens_to_ids(list("0123456789")))
    assert set(classes.values()) == {NUMERAL}
    assert numeral_classes(tokenizer, chunk=7) == classes  # read a few ids at a time, the same classes
    # 48 byte tokens: about the 16 Qwen tokens of the default span
    # "--mem=137M --mem=274M ...": every 48-token window holds a number no other window has
    loop = tokenizer.encode("srun" + "".join(f" --mem={137 * n}M" for n in range(1, 30)))
    assert first_stop(loop, span=48, limit=3) is None
    stop = first_stop(loop, span=48, limit=3, classes=classes)
    assert stop is not None
    assert tokenizer.decode(loop[: stop + 1]).count("--mem=") <= 8  # caught within a few options
    # words still tell lines apart: numbered steps that say different things go on
    steps = ["drain the node", "run the update", "reboot it", "check its state", "resume the node", "tell the users"]
    lines = tokenizer.encode("".join(f"{n}. Then {step} ({n * 7} min).\n" for n, step in enumerate(steps, 1)))
    assert first_stop(lines, span=48, limit=3, classes=classes) is None


def test_two_repeats_are_allowed_and_span_zero_is_off():
    sentence = list(range(100, 120))
    assert first_stop(sentence * 2, span=16, limit=3) is None
    assert first_stop([7] * 500, span=0, limit=3) is None
    assert first_stop([7] * 10, span=4, limit=3) == 5  # runs overlap: the 3rd run of four 7s ends at token 6


def test_a_limit_below_two_is_refused():
    with pytest.raises(SpecragError, match="repeat_limit"):
        GenerationConfig(repeat_span=8, repeat_limit=1)


@pytest.fixture
def engine(target, draft, tokenizer):
    return Engine(target, tokenizer, draft)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(f"{v}" for v in m.values()))
def test_speculative_decoding_stops_on_the_same_token_as_plain(engine, mode):
    rng = random.Random(11)
    stopped = 0
    for _ in range(8):
        prompt = random_prompt(rng, rng.randint(5, 60))
        chunks = [prompt[rng.randrange(len(prompt)) :]]
        guard = dict(repeat_span=4, repeat_limit=3)
        unguarded = plain(engine, prompt, chunks, max_new_tokens=60)
        reference = plain(engine, prompt, chunks, max_new_tokens=60, **guard)
        result = engine.complete(prompt, chunks, GenerationConfig(max_new_tokens=60, **guard, **mode))
        assert result.token_ids == reference.token_ids and result.text == reference.text
        assert result.finish_reason == reference.finish_reason
        stop = first_stop(unguarded.token_ids, 4, 3)
        if stop is None:
            assert reference.token_ids == unguarded.token_ids
        else:
            stopped += 1
            assert reference.finish_reason == "repeat"
            assert reference.token_ids == unguarded.token_ids[: stop + 1]
            assert unguarded.text.startswith(reference.text)
    assert stopped  # the peaky tiny target does loop: the stop path was exercised
