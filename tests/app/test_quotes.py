"""Quotes the model wrote itself are provenance too: on a path that drafts nothing, the chat said
"nothing was copied verbatim" under an answer that was two paragraphs of a man page."""

from app.copilot import Passage, Segment
from app.copilot.citations import build_citations
from app.copilot.quotes import mark_quotes
from app.web import render

SQUEUE = (
    "The reason a job is waiting for execution is printed within parenthesis.\n"
    "For terminated jobs with failure: an explanation as to why the job failed."
)
FAQ = "As a guideline, issue an scontrol show job <jobid> and look at the field State and Reason."


def test_a_run_of_a_passage_in_the_models_own_text_is_marked_with_that_passage():
    answer = (
        "[3] The reason a job is waiting for execution is printed within parenthesis. For terminated jobs "
        "with failure: an explanation. Also run `scontrol show job <jobid>` [5]."
    )
    segments = mark_quotes([Segment(answer)], {3: SQUEUE, 5: FAQ})
    assert "".join(s.text for s in segments) == answer  # nothing lost or moved
    quoted = [(s.text, s.passage) for s in segments if s.passage is not None]
    # across the passage's line break, up to the first word the passage does not have there
    assert quoted == [
        ("The reason a job is waiting for execution is printed within parenthesis. For terminated jobs with failure: "
         "an explanation", 3),
    ]  # fmt: skip
    # "scontrol show job <jobid>" is in [5], but three words are a phrase, not a quote
    assert segments[-1] == Segment(". Also run `scontrol show job <jobid>` [5].")


def test_short_common_runs_and_drafted_copies_are_left_as_they_are():
    drafted = Segment("issue an scontrol show job", 5)
    own = Segment(" and the job is waiting for it.")  # "the job is waiting" is not a quote
    assert mark_quotes([drafted, own], {5: FAQ, 3: SQUEUE}) == [drafted, own]


def test_a_run_counts_its_words_from_its_first_to_its_last_that_carries_the_sentence():
    # session 61: "submit the job to the" and "will be marked "DOWN" if" were reported as quotes under another
    # source's marker; their words between the first and last that are not "the", "to", "will", "if", ... are 3 and 2
    sbatch = "Use sbatch to submit the job to the controller, where it will be marked DOWN if it fails."
    for phrase in ("You submit the job to the queue", "The node will be marked DOWN if the health check fails"):
        assert mark_quotes([Segment(phrase)], {2: sbatch}) == [Segment(phrase)]
    quoted = mark_quotes([Segment("It will submit the job to the controller, as sbatch does.")], {2: sbatch})
    assert [s.text for s in quoted if s.passage == 2] == ["submit the job to the controller,"]


def test_the_chat_shows_where_an_undrafted_answer_was_copied_from():
    passages = [Passage(1, FAQ, "faq.html", "FAQ"), Passage(2, SQUEUE, "squeue.html", "squeue")]
    answer = "[2] The reason a job is waiting for execution is printed within parenthesis."
    ids = list(range(12))
    citations = build_citations(answer, ids, ["target"] * len(ids), passages, lambda t: answer[: len(t) * 7])
    sources = [{"number": 2, "title": "squeue", "path": "squeue.html"}]
    html = render.provenance_html(render.merge_verbatim(citations.segments, {2: SQUEUE}), sources)
    assert "nothing was copied" not in html
    assert 'title="copied verbatim from source [2]">The reason a job is waiting' in html
    assert citations.copied == {}  # the drafter copied nothing: its own count stays honest


TIME_MIN = (
    "Set a minimum time limit on the job allocation. If specified, the job may have its --time limit lowered "
    "to a value no lower than --time-min."
)


def test_a_quote_two_sources_hold_is_credited_to_the_one_its_sentence_cites():
    # srun [2] and sbatch [3] share the option's description; the sentence cites sbatch
    passages = {2: "srun: " + TIME_MIN, 3: "sbatch: " + TIME_MIN}
    answer = "[3] Use `--time-min` to set a minimum time limit on the job allocation. Then check the queue."
    quoted = [(s.text, s.passage) for s in mark_quotes([Segment(answer)], passages) if s.passage is not None]
    assert quoted == [("set a minimum time limit on the job allocation.", 3)]
    # a marker at the sentence's end counts as well; in another sentence it does not
    answer = "Use `--time-min` to set a minimum time limit on the job allocation [3]. See also [1]."
    assert [s.passage for s in mark_quotes([Segment(answer)], passages) if s.passage] == [3]
    answer = "[3] See the options. Use `--time-min` to set a minimum time limit on the job allocation."
    assert [s.passage for s in mark_quotes([Segment(answer)], passages) if s.passage] == [2]


def test_a_cited_source_that_lacks_the_quote_does_not_take_it():
    passages = {2: "srun: " + TIME_MIN, 3: "sbatch: " + TIME_MIN, 4: "squeue: shows the queue"}
    answer = "[4] Set a minimum time limit on the job allocation with `--time-min`."
    assert [s.passage for s in mark_quotes([Segment(answer)], passages) if s.passage] == [2]


def test_a_quote_the_drafter_copied_a_piece_of_is_one_quote_and_its_other_copies_stay():
    from app.copilot.attribution import judge_quotes
    from app.copilot.quotes import with_quotes

    # fresh18 on int4: the drafter copied pieces of a sentence the model quoted whole, and the quote checks saw
    # only runs too short to count. Here the model wrote the quote's ends and the drafter its middle.
    drafted = [
        Segment("[3] The reason a job is "),
        Segment("waiting for", 3),
        Segment(" execution is printed within parenthesis. Then "),
        Segment("issue an scontrol", 5),  # a copy outside any quote keeps its passage
        Segment(" now."),
    ]
    texts = {3: SQUEUE, 5: FAQ}
    segments = with_quotes(drafted, texts)
    assert "".join(s.text for s in segments) == "".join(s.text for s in drafted)
    assert [(s.text, s.passage) for s in segments if s.passage is not None] == [
        ("The reason a job is waiting for execution is printed within parenthesis.", 3),
        ("issue an scontrol", 5),
    ]
    assert [q.text for q in judge_quotes(segments, texts)] == [
        "The reason a job is waiting for execution is printed within parenthesis."
    ]
    # what the checks saw before: the piece after the drafter's copy alone, its start cut off
    assert [q.text for q in judge_quotes(mark_quotes(drafted, texts), texts)] == [
        "execution is printed within parenthesis."
    ]
