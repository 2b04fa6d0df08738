"""Decoding keeps code to the sources: the token filter, and the pipeline that applies it."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "generation"))

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, collect, loading
from app.copilot.copied_code import CopiedCode, in_code_item
from app.copilot.grounding import check_grounding
from tiny import byte_tokenizer

PASSAGES = [
    "reboot [ASAP] [nextstate={RESUME|DOWN}] [reason=<reason>] {ALL|<NodeList>}: reboot the nodes when they "
    "become idle. Example: scontrol reboot ASAP nextstate=RESUME node[01-04]",
    "Submit a job array with $ sbatch --array=0-31 -N1 tmp and watch it with squeue --me.",
]
QUESTION = "How do I reboot node c042 once its jobs end?"


@pytest.fixture(scope="module")
def tokenizer():
    return byte_tokenizer()


def decode_wish(tokenizer, wish: str, filter_: CopiedCode | None, limit: int = 200, second: float = 9.0) -> str:
    """Greedy decoding by a 'model' that wants to write `wish`: its next byte scores 10, and the bytes of a
    fixed fallback order score `second` and a little less each. Stops at the end of the wish or at the
    first byte it did not want."""
    fallback = " etaoinsrhldcumfpgwybvkxjqz"
    ids: list[int] = []
    while len(ids) < limit:
        text = tokenizer.decode(ids)
        if text == wish:
            return text
        logits = torch.full((len(tokenizer),), -10.0)
        for rank, char in enumerate(fallback):
            logits[tokenizer.convert_tokens_to_ids(char if char != " " else "Ġ")] = second - 0.05 * rank
        wanted = tokenizer(wish[len(text)], add_special_tokens=False)["input_ids"][0]
        logits[wanted] = 10.0
        row = logits if filter_ is None else filter_.restrict(ids, logits, greedy=True)
        ids.append(int(row.argmax()))
        if ids[-1] != wanted:
            return tokenizer.decode(ids)
    return tokenizer.decode(ids)


@pytest.mark.parametrize(
    "wish",
    [
        "[1] Run `scontrol reboot ASAP nextstate=RESUME node[01-04]` now.",  # verbatim
        "[1] Run `scontrol reboot ASAP nextstate=RESUME c042` now.",  # the question's node
        "Run `scontrol reboot ASAP reason=jobs_end c042`.",  # words of the question, joined
        "Use `sbatch --array=0-499%10 -N1 tmp`, see --array=1-5 [2].",  # the user's own numbers
        "```\nscontrol reboot ASAP nextstate=RESUME <node>\n```\nThen wait.",  # a placeholder, in a block
        "Any prose at all -- even with dashes - and `` empty spans.",
        "[1] Run ``scontrol reboot ASAP nextstate=RESUME c042`` once ``squeue --me`` is empty.",  # rst's literals
    ],
)
def test_code_the_sources_hold_is_written_unchanged(tokenizer, wish):
    code = CopiedCode(tokenizer, PASSAGES, QUESTION)
    assert decode_wish(tokenizer, wish, code) == wish
    assert code.steered == code.left_alone == 0  # every wanted byte was allowed


@pytest.mark.parametrize(
    "wish, invented",
    [
        ("[1] Run `scontrol reboot --keep-partinfo c042` now.", "--keep-partinfo"),
        ("Then run `systemctl restart slurmd` [1].", "systemctl"),
        ("```\nsbatch --array=0-3 --afterok=12 tmp\n```", "--afterok"),
        ("Add --exclusive to the job [2].", "--exclusive"),
        ("Then run ``systemctl restart slurmd`` [1].", "systemctl"),  # a double-backtick span, as rst writes code
    ],
)
def test_an_invented_command_or_option_is_steered_away_from_while_it_is_written(tokenizer, wish, invented):
    unfiltered = decode_wish(tokenizer, wish, None)
    assert unfiltered == wish and not all(i.found for i in check_grounding(wish, PASSAGES, QUESTION))
    steered = decode_wish(tokenizer, wish, CopiedCode(tokenizer, PASSAGES, QUESTION))
    assert steered != wish and invented not in steered
    # it turned off inside the invention, where the text written so far could still be found
    assert steered[:-1] == wish[: len(steered) - 1] and len(steered) - 1 >= wish.index(invented[:2].strip("-") or "-")


def test_a_tool_command_its_man_page_does_not_list_is_steered_away_from_though_the_passage_says_the_word(tokenizer):
    passages = ["To rename a job, run scontrol update JobId=<job_id> JobName=<name>."]
    wish = "Run `scontrol rename <job_id>` [1]."
    assert decode_wish(tokenizer, wish, CopiedCode(tokenizer, passages, QUESTION)) == wish  # its words are [1]'s
    code = CopiedCode(tokenizer, passages, QUESTION, {"scontrol": frozenset({"update", "show"})})
    steered = decode_wish(tokenizer, wish, code)
    assert steered[:-1] == "Run `scontrol " and steered[-1] != "r" and code.steered == 1


def test_an_alternative_far_less_likely_than_the_models_choice_is_not_forced(tokenizer):
    wish = "[1] Run `scontrol reboot --keep-partinfo c042` now."
    code = CopiedCode(tokenizer, PASSAGES, QUESTION)
    assert decode_wish(tokenizer, wish, code, second=5.0) == wish  # 5 logits below: not a way the model had in mind
    assert code.left_alone > 0 and code.steered == 0
    assert not all(i.found for i in check_grounding(wish, PASSAGES, QUESTION))  # so the check flags it


def test_a_special_token_is_never_steered_to(tokenizer):
    code = CopiedCode(tokenizer, PASSAGES, QUESTION)
    ids = tokenizer("Run `scontrol reboot ", add_special_tokens=False)["input_ids"]
    logits = torch.zeros(len(tokenizer))
    dash, eos, a = tokenizer.convert_tokens_to_ids("-"), tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("A")
    logits[dash], logits[eos], logits[a] = 10.0, 9.5, 9.0  # --something is in no source
    assert int(code.restrict(ids, logits, greedy=True).argmax()) == a  # ASAP, not the end token
    logits[eos] = 11.0
    assert code.restrict(ids, logits, greedy=True) is logits  # the model's own choice to end stays


def test_closing_a_span_is_allowed_only_when_the_check_finds_it(tokenizer):
    code = CopiedCode(tokenizer, PASSAGES, QUESTION)
    assert code.violated("Run `scontrol rebo`", len("Run `scontrol rebo"))  # no source has `scontrol rebo`
    assert not code.violated("Run `scontrol rebo", len("Run `scontrol reb"))  # ... but it may become reboot
    assert not code.violated("Run `scontrol reboot`", len("Run `scontrol reboot"))
    assert code.violated("```\nsqueue --me --all\n", len("```\nsqueue --me --all"))  # the line is closed
    # an earlier flagged span is not judged again: the text after it is free
    assert not code.violated("`made up` and then", len("`made up` and the"))


def test_the_end_of_a_text_is_in_code_in_a_block_a_span_or_an_option():
    assert in_code_item("see\n```\nsinfo -R")
    assert in_code_item("run `sinfo")
    assert in_code_item("add --exc")
    assert not in_code_item("run `sinfo` and ")
    assert not in_code_item("```\nsinfo\n```\nDone")


def test_under_sampling_forbidden_candidates_are_masked_and_the_rest_keep_their_logits(tokenizer):
    code = CopiedCode(tokenizer, PASSAGES, QUESTION)
    text = "Run `scontrol reboot "
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    logits = torch.linspace(-5.0, 5.0, len(tokenizer))
    a, dash = (tokenizer.convert_tokens_to_ids(c) for c in ("A", "-"))  # ASAP is in a source, --anything is not
    logits[a], logits[dash] = 20.0, 21.0
    row = code.restrict(ids, logits, greedy=False)
    assert row[dash] == float("-inf") and row[a] == logits[a]
    assert int(row.argmax()) == a and code.steered == 1
    prose = tokenizer("Run it", add_special_tokens=False)["input_ids"]
    assert code.restrict(prose, logits, greedy=False) is logits  # prose: nothing forbidden, the row untouched


def test_when_no_likely_token_keeps_the_code_grounded_the_row_is_left_alone(tokenizer):
    code = CopiedCode(tokenizer, PASSAGES, QUESTION, candidates=2)
    ids = tokenizer("Run `zzz", add_special_tokens=False)["input_ids"]  # no source has a word starting zzz
    logits = torch.zeros(len(tokenizer))
    logits[tokenizer.convert_tokens_to_ids("z")] = 5.0
    assert code.restrict(ids, logits, greedy=True) is logits and code.steered == 0 and code.left_alone == 1


def test_a_begun_word_of_the_sources_is_finished_when_nothing_likely_goes_on_with_it(tokenizer):
    """Seen on "which command shows fair-share values": steered to `ssha`, the model had nothing likely
    that went on with `sshare` and wrote `ssha -l`."""
    passages = [*PASSAGES, "Run sshare -l (lowercase L) to view the fairshare columns."]
    code = CopiedCode(tokenizer, passages, QUESTION)

    def next_byte(text: str, wanted: str, unlikely: dict[str, float]) -> str:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        logits = torch.zeros(len(tokenizer))
        logits[tokenizer.convert_tokens_to_ids(wanted)] = 10.0
        for char, logit in unlikely.items():
            logits[tokenizer.convert_tokens_to_ids(char)] = logit
        return tokenizer.decode([int(code.restrict(ids, logits, greedy=True).argmax())])

    # the model wants to close the span (or go on with " -l"), `r` is 7 logits down: sshare is finished
    assert next_byte("Run `ssha", "`", {"r": 3.0}) == "r"
    assert next_byte("Run `sshar", "Ġ", {"e": 1.0}) == "e"
    assert code.finished == 2 and code.steered == 0
    assert next_byte("Run `sshare", "Ġ", {}) == " "  # the source's `sshare -l` goes on: left to the model
    # nothing is forced where the begun word is one of the sources' own, begins several, or begins none
    assert next_byte("Run `squeue", "x", {"Ġ": 1.0}) == "x"  # squeue is a word: what fails is not it
    assert next_byte("Run `s", "x", {"b": 1.0}) == "x"  # sbatch, scontrol, sshare, squeue ...
    assert next_byte("Run `zzz", "z", {}) == "z"
    assert next_byte("ssha is what I typed", "x", {"r": 3.0}) == "x"  # prose is never touched
    assert code.finished == 2 and code.left_alone == 3


@pytest.fixture
def copilot(tiny_engine):
    from copilot_fakes import FakeRetriever

    retriever = FakeRetriever([(f"doc-{i}.md", text) for i, text in enumerate(PASSAGES)], heading="Nodes")
    options = CopilotOptions(answer=AnswerOptions(max_new_tokens=32, gate="off"))
    return Copilot(loading.load_engine(ModelOptions()), options, retriever)


def test_the_pipeline_decodes_through_the_filter_unless_asked_not_to(copilot, monkeypatch):
    seen = []
    generate = copilot.engine.generate

    def spy(prompt_ids, chunks, config, token_filter=None):
        seen.append(token_filter)
        return generate(prompt_ids, chunks, config, token_filter)

    monkeypatch.setattr(copilot.engine, "generate", spy)
    on = collect(copilot.answer(QUESTION))
    free = AnswerOptions(max_new_tokens=32, gate="off", code_from_sources=False)
    off = collect(copilot.answer(QUESTION, options=free))
    assert isinstance(seen[0], CopiedCode) and seen[1] is None
    assert seen[0].sources.question == QUESTION and "ASAP" in seen[0].sources.haystack
    assert on.stats["code_steered"] == seen[0].steered and off.stats["code_steered"] is None
    assert on.stats["code_left_alone"] == seen[0].left_alone and off.stats["code_left_alone"] is None
    assert on.stats["code_finished"] == seen[0].finished and off.stats["code_finished"] is None


def test_the_free_code_flag_switches_the_filter_off():
    import argparse

    from app.cli_options import add_answer_args, answer_options

    parser = argparse.ArgumentParser()
    add_answer_args(parser)
    assert answer_options(parser.parse_args([])).code_from_sources
    assert not answer_options(parser.parse_args(["--free-code"])).code_from_sources
