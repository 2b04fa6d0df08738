"""Each metric on handcrafted cases whose values are worked out by hand."""

import math

import pytest

from app.eval import metrics

DOCS = "/cache/slurm/html"


def test_source_matching_by_basename_or_path_suffix():
    assert metrics.source_matches(f"{DOCS}/sbatch.html", "sbatch.html")
    assert metrics.source_matches(f"{DOCS}/sbatch.html", "html/sbatch.html")
    assert metrics.source_matches(f"{DOCS}/sbatch.html", f"{DOCS}/sbatch.html")
    assert not metrics.source_matches(f"{DOCS}/xsbatch.html", "sbatch.html")
    assert not metrics.source_matches(f"{DOCS}/sbatch.html", "other/sbatch.html")
    assert not metrics.source_matches(f"{DOCS}/sbatch.html", "")


def test_first_hit_at_rank_two_of_one_gold_source():
    scores = metrics.retrieval_metrics([f"{DOCS}/a.html", f"{DOCS}/gold.html", f"{DOCS}/b.html"], ["gold.html"])
    assert scores["hit@1"] == 0.0
    assert scores["hit@2"] == scores["hit@10"] == 1.0
    assert scores["recall@1"] == 0.0 and scores["recall@2"] == 1.0
    assert scores["mrr"] == 0.5
    assert scores["ndcg@2"] == pytest.approx(1 / math.log2(3), abs=1e-6)  # DCG 1/log2(3), IDCG 1


def test_two_of_three_gold_sources_with_a_duplicate_passage():
    ranked = [f"{DOCS}/a.html", f"{DOCS}/x.html", f"{DOCS}/a.html", f"{DOCS}/c.html"]
    scores = metrics.retrieval_metrics(ranked, ["c.html", "a.html", "z.html"])
    assert scores["hit@1"] == 1.0 and scores["mrr"] == 1.0
    assert scores["recall@3"] == pytest.approx(1 / 3, abs=1e-6)  # the second a.html passage adds nothing
    assert scores["recall@4"] == pytest.approx(2 / 3, abs=1e-6)
    dcg = 1 + 1 / math.log2(5)  # gold at ranks 1 and 4
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # three gold sources
    assert scores["ndcg@4"] == pytest.approx(dcg / idcg, abs=1e-6)


def test_a_miss_scores_zero_and_no_gold_gives_no_metrics():
    scores = metrics.retrieval_metrics([f"{DOCS}/a.html", f"{DOCS}/b.html"], ["gold.html"])
    assert scores["hit@10"] == scores["recall@10"] == scores["mrr"] == scores["ndcg@10"] == 0.0
    assert metrics.retrieval_metrics([], ["gold.html"])["hit@5"] == 0.0
    assert metrics.retrieval_metrics([f"{DOCS}/a.html"], []) is None


def test_squad_normalisation():
    assert metrics.normalize_answer("The  Cat, sat on a MAT!") == "cat sat on mat"


def test_exact_match_is_the_best_over_references():
    assert metrics.exact_match("The Beatles.", ["Rolling Stones", "beatles"]) == 1.0
    assert metrics.exact_match("Beatles band", ["beatles"]) == 0.0
    assert metrics.exact_match("anything", []) is None


def test_token_f1_by_hand():
    # answer tokens: cat sat on mat (4); reference: cat sat (2); common 2 -> P 0.5, R 1, F1 2/3
    assert metrics.token_f1("The cat sat on the mat", ["a cat sat"]) == pytest.approx(2 / 3, abs=1e-6)
    assert metrics.token_f1("dog", ["cat"]) == 0.0
    assert metrics.token_f1("cat cat", ["cat", "cat cat dog"]) == pytest.approx(0.8, abs=1e-6)  # max(2/3, 0.8)
    assert metrics.token_f1("x", []) is None


def test_reference_contained_matches_whole_words():
    assert (
        metrics.reference_contained("It was sung by George Harrison in 1987.", ["James Ray", "George Harrison"]) == 1.0
    )
    assert metrics.reference_contained("Harrisonburg", ["Harrison"]) == 0.0


def test_keyword_recall_keeps_punctuation_and_ignores_case_and_spacing():
    answer = "Submit with  SBATCH --array=0-499%10 and check squeue."
    assert metrics.keyword_recall(answer, ["sbatch --array=0-499%10", "squeue", "scontrol"]) == pytest.approx(2 / 3)
    assert metrics.keyword_recall(answer, ["--array=0-499"]) == 1.0
    assert metrics.keyword_recall(answer, ["array 0 499"]) == 0.0  # punctuation is not dropped
    assert metrics.keyword_recall(answer, []) is None


def test_keyword_recall_counts_a_keyword_only_as_a_whole_and_an_option_in_its_case():
    answer = "Run `scontrol change --job-name=new <job_id>` or `srun --ntasks=6`; cpus are counted per node."
    assert metrics.keyword_recall(answer, ["Name="]) == 0.0  # inside --job-name=
    assert metrics.keyword_recall(answer, ["-N"]) == 0.0  # --ntasks is not -N
    assert metrics.keyword_recall(answer, ["cpu"]) == 0.0  # cpus
    assert metrics.keyword_recall(answer, ["--job-name", "SCONTROL", "node"]) == 1.0
    assert metrics.keyword_recall("Use -N 3 with GrpTRES=cpu=100.", ["-N", "cpu", "GrpTRES"]) == 1.0


def test_an_option_keyword_counts_in_another_form_its_tools_page_gives_it_on_a_line_of_that_tool():
    from types import SimpleNamespace

    from app.copilot.tool_pages import read_tool_pages

    def chunk(title: str, text: str) -> SimpleNamespace:
        return SimpleNamespace(text=text, source=f"{title}.html", title=title, heading="OPTIONS")

    pages = read_tool_pages(
        [
            chunk(
                "srun", "- -u, --unbuffered\n- By default, the connection between slurmstepd and the task is buffered."
            ),
            chunk(
                "squeue", "- -u, --user=<user_list>\n- Request jobs or job steps from a comma separated list of users."
            ),
        ]
    )
    forms = metrics.option_forms(pages.options)
    assert forms["--unbuffered"] == {"srun": frozenset({"-u"})} and forms["-u"]["squeue"] == frozenset({"--user"})
    # fresh15 (session 60): `srun -u`, right, had scored nothing for "--unbuffered"
    assert metrics.keyword_recall("Run:\n```\nsrun -u my_program\n```", ["--unbuffered"], forms) == 1.0
    assert metrics.keyword_recall("Run `srun -u my_program`.", ["--unbuffered"]) == 0.0  # without the pages, as before
    assert metrics.keyword_recall("Run `squeue -u alice`.", ["--unbuffered"], forms) == 0.0  # squeue's -u is --user
    assert metrics.keyword_recall("Use the `-u` option.", ["--unbuffered"], forms) == 0.0  # no line runs srun


def test_a_gated_answer_is_scored_as_saying_nothing_though_its_source_titles_hold_a_keyword():
    from app.copilot import citations as cite
    from app.copilot.events import Final, Passage, Turn
    from app.copilot.gate import refusal_text
    from app.eval.questions import Question
    from app.eval.runner import answer_record

    nearest = [Passage(1, "text", "troubleshoot.html", "Troubleshooting", "Jobs stuck in COMPLETING state")]
    question = Question("n-01", "A job is stuck in CG state. What now?", ("COMPLETING",), ("COMPLETING",), ("x",))
    refusal = refusal_text(nearest)
    assert "COMPLETING" in refusal
    final = Final(
        question=question.question, answer=refusal, finish_reason="gated", passages=nearest, sources=[],
        citations=cite.no_citations(nearest), grounding=[], stats={}, prompt_ids=[], output_ids=[], origins=[],
        turn=Turn(question.question, refusal, (), refused=True), models={}, gated=True,
        relevance={"similarity": 0.41, "threshold": 0.49, "judged": 0.2, "judge_threshold": 0.63, "covered": False},
    )  # fmt: skip
    record = answer_record(final, question)
    assert record["keyword_recall"] == 0.0 and record["f1"] == 0.0 and record["text"] == refusal
    assert record["relevance"]["judged"] == 0.2  # why it was refused stays with the row
    unanswerable = Question("u-1", "Who is on call?", ("The sources do not cover this question.",), (), ())
    assert answer_record(final, unanswerable)["f1"] > 0.3  # there the refusal is the answer, and it is scored
