"""Incremental detokenization and stop strings."""

import random

from generation.detokenizer import IncrementalDetokenizer
from generation.stopping import StopStrings

TEXT = "Node wn042 is DOWN → drain it: scontrol update… 数据传输失败 🚒 done"


def test_deltas_never_split_a_multibyte_character_and_add_up(tokenizer):
    ids = tokenizer.encode(TEXT)
    assert len(ids) > len(TEXT)  # byte-level: multi-byte characters span several tokens
    rng = random.Random(0)
    for _ in range(20):
        detok, deltas, i = IncrementalDetokenizer(tokenizer), [], 0
        while i < len(ids):
            step = rng.randint(1, 4)
            deltas.append(detok.push(ids[i : i + step]))
            i += step
        deltas.append(detok.flush())
        assert all("\ufffd" not in d for d in deltas)
        assert "".join(deltas) == TEXT


def test_stop_strings_hold_back_partial_matches():
    stops = StopStrings(["\nQuestion:", "###"])
    out = []
    for piece in ["The answer", " is 42.\nQu", "est", "ion: next"]:
        text, stopped = stops.push(piece)
        out.append(text)
        if stopped:
            break
    assert "".join(out) == "The answer is 42."
    assert stopped


def test_stop_strings_release_held_text_that_was_not_a_stop():
    stops = StopStrings(["###"])
    assert stops.push("a #") == ("a ", False)
    assert stops.push("# b") == ("## b", False)
    assert stops.push("#") == ("", False)
    assert stops.flush() == "#"
