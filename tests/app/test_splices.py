"""A sentence that joins one list item's subject to another's verdict is reported, a summary is not."""

from app.copilot.events import Passage
from app.copilot.pipeline import final_from_text
from app.copilot.splices import items_of, spliced_sentences
from app.copilot.summary import check_notes
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.web.render import details_html

THRESHOLDS = Passage(
    1,
    "## Thresholds\n\n"
    "- **One node failing the probe**: P3. Drain the node, fix it or hand it to the Grid Middleware\n  Expert.\n"
    "- **More than 5 % of worker nodes (12 or more of the 240) failing**: a site-wide problem, usually\n"
    "  the squids or upstream. P2, page the On-call Site Administrator.\n",
    "cvmfs-problems.md",
    "CVMFS Problems on Worker Nodes",
    "Thresholds",
)
SPLICED = (
    "[1] One node failing the probe makes it a site-wide problem, usually the squids or upstream. "
    "P2, page the On-call Site Administrator."
)
QUESTION = "And if only one node fails it?"


def test_one_items_subject_with_anothers_verdict_is_reported():
    (splice,) = spliced_sentences(SPLICED, [THRESHOLDS])
    assert splice.first == "One node failing the probe"
    assert splice.second == "a site-wide problem, usually the squids or upstream."
    assert splice.source == 1
    final = final_from_text(QUESTION, [THRESHOLDS], SPLICED, "eos")
    warnings = [text for level, text in check_notes(final, code=str) if level == "warning"]
    assert any("come from two different items of [1], joined in one sentence" in w for w in warnings)
    html = details_html(final)
    assert "two different items of [1]" in html
    assert "Check before running or acting on it</div>" in html  # the words are found: no "not found" heading


def test_an_items_own_words_are_no_splice():
    right = "[1] One node failing the probe: P3. Drain the node, fix it or hand it to the Grid Middleware Expert."
    assert spliced_sentences(right, [THRESHOLDS]) == []
    # two items quoted in two sentences are two statements, each of its own item
    both = "[1] One node failing the probe: P3. More than 5 % of worker nodes (12 or more of the 240) failing: P2."
    assert spliced_sentences(both, [THRESHOLDS]) == []
    # two items listed in one sentence, joined only by "and" or "then", each keep their own words
    listed = (
        "[1] Drain the node, fix it or hand it to the Grid Middleware Expert and page the On-call Site Administrator."
    )
    assert spliced_sentences(listed, [THRESHOLDS]) == []
    assert spliced_sentences(listed.replace(" and ", " to "), [THRESHOLDS])  # "to" makes one a purpose of the other


def test_words_left_out_of_one_paragraph_are_a_summary():
    paragraph = Passage(
        2,
        "When a job is terminating, both the job and its nodes enter the COMPLETING state. As the Slurm\n"
        "daemon on each node determines that all processes associated with the job have terminated, that\n"
        "node changes state to IDLE or some other appropriate state.",
        "faq.html",
        "FAQ",
    )
    answer = "[2] When a job is terminating, both the job and its nodes change state to IDLE or some other state."
    assert spliced_sentences(answer, [paragraph]) == []


def test_quotes_far_apart_or_from_two_sources_are_not_joined():
    apart = (
        "[1] One node failing the probe is, as the runbook explains for the other case, "
        "a site-wide problem, usually the squids or upstream."
    )
    assert spliced_sentences(apart, [THRESHOLDS]) == []
    other = Passage(3, "Usually the squids or upstream are to blame when many nodes fail.", "notes.md", "Notes")
    two_sources = "[1] One node failing the probe means usually the squids or upstream are to blame."
    assert spliced_sentences(two_sources, [THRESHOLDS, other]) == []


def test_items_are_list_items_rows_and_paragraphs_and_a_term_stays_with_its_description():
    text = (
        "Intro paragraph that wraps\nover two lines.\n\n- FAILING\n- The node is expected to fail soon.\n\n"
        "| a | b |\n| c | d |\n\n1. first step\n2. second step"
    )
    assert items_of(text) == [
        "Intro paragraph that wraps over two lines.",
        "- FAILING - The node is expected to fail soon.",
        "| a | b |",
        "| c | d |",
        "1. first step",
        "2. second step",
    ]


def test_the_eval_records_the_splice():
    final = final_from_text(QUESTION, [THRESHOLDS], SPLICED, "eos")
    record = answer_record(final, Question("r-1", QUESTION, keywords=("P3",)))
    assert record["spliced"] == [
        [1, "One node failing the probe", "a site-wide problem, usually the squids or upstream."]
    ]
    assert record["keyword_recall"] == 0.0  # the spliced answer gives P2, not the item's P3


APPROVALS = Passage(
    4,
    "## Escalation and approvals\n\n"
    "| Situation | Who decides | Who declares |\n| --- | --- | --- |\n"
    "| Planned, under 24 h, single service | Service expert | Service expert or Shift Operator |\n"
    "| Planned, over 24 h or whole site | **Site Manager** | Shift Operator on instruction |\n"
    "| Unplanned outage | Nobody, it must be declared | Shift Operator, within 1 hour |\n",
    "site-downtime-announcement.md",
    "Declaring Scheduled and Unscheduled Downtimes",
    "Escalation and approvals",
)


def test_a_sentence_joining_cells_of_two_table_rows_is_reported_with_both_rows():
    """Seen in the chat (session 58): the whole-site row's approver with the unplanned row's deadline."""
    answer = "[4] Site Manager, within 1 hour [4]."
    (splice,) = spliced_sentences(answer, [APPROVALS])
    assert (splice.first, splice.second, splice.source) == ("Site Manager", "within 1 hour", 4)
    assert splice.rows == ("Planned, over 24 h or whole site", "Unplanned outage")
    final = final_from_text(
        "who approves a full site downtime and how much notice do users need?", [APPROVALS], answer, "eos"
    )
    [(level, note)] = [(level, text) for level, text in check_notes(final, code=str) if "two rows" in text]
    assert level == "warning" and "of [4]'s table, “Planned, over 24 h or whole site” and “Unplanned outage”" in note
    assert "“Planned, over 24 h or whole site” and “Unplanned outage”" in details_html(final)  # the web chat's


def test_one_rows_cells_or_a_sentence_naming_the_rows_it_compares_are_no_splice():
    for answer in (
        "[4] The Site Manager decides; the Shift Operator declares it on instruction.",  # one row
        "For planned, over 24 h or whole site work the Site Manager decides; an unplanned outage is declared "
        "by the Shift Operator, within 1 hour [4].",  # both rows named: a comparison
        "[4] The Shift Operator declares it.",  # in three rows: no row's own words
    ):
        assert spliced_sentences(answer, [APPROVALS]) == [], answer
