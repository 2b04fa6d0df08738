"""A contact number the sources give for someone else is reported; an extension they lack is a phone number."""

from pathlib import Path

from copilot_fakes import FakeRetriever, script_answer

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, Passage, collect, loading
from app.copilot.contacts import misattributed_numbers
from app.copilot.specifics import check_specifics
from app.copilot.summary import check_notes, definition
from app.web.render import details_html

RUNBOOKS = Path(__file__).parents[2] / "corpora" / "runbooks"
MATRIX = (RUNBOOKS / "escalation-matrix.md").read_text(encoding="utf-8")
SECURITY = (RUNBOOKS / "security-incident-first-response.md").read_text(encoding="utf-8")
PASSAGES = [
    Passage(1, MATRIX, "escalation-matrix.md", "Escalation Matrix and Incident Priorities"),
    Passage(2, SECURITY, "security-incident-first-response.md", "Security Incident First Response"),
]
# seen in the chat (session 57): the runbooks reach the Storage Expert through a helpdesk queue, never by phone
WRONG = "[1] The Storage Expert's phone extension is 4333."


def test_a_number_the_sources_give_for_someone_else_is_reported_with_whose_it_is():
    [told] = misattributed_numbers(WRONG, PASSAGES)
    assert (told.said_of, told.term, told.source, told.quoted) == ("Storage Expert", "Site Security Officer", 1, "4333")
    assert "Site Security Officer (SSO)" in told.text and "Storage Expert" not in told.text
    assert definition(told, str) == (
        "4333 is the number [1] (Escalation Matrix and Incident Priorities) gives for Site Security Officer, "
        "not for Storage Expert: check whom it reaches before you call"
    )
    [told] = misattributed_numbers("The Storage Expert is on extension 4111.", PASSAGES)
    assert told.term == "On-call Site Administrator"
    # seen in a probe: a table's cells are not one name ("Data Centre Facilities Duty | Power, UPS, ...")
    [told] = misattributed_numbers("[1] The Site Manager's phone extension is 4999 [2].", PASSAGES)
    assert told.term == "Data Centre Facilities Duty" and told.text.startswith("Data Centre Facilities Duty · Power")


def test_a_sentence_naming_nobody_is_told_of_the_one_person_the_question_asks_about():
    asked = "what's the site manager's phone extension?"  # in lower case, as operators type
    [told] = misattributed_numbers("[1] Dial extension 4999.", PASSAGES, asked)
    assert (told.said_of, told.term) == ("Site Manager", "Data Centre Facilities Duty")
    assert misattributed_numbers("[1] Dial extension 4999.", PASSAGES) == []  # no question: nobody named
    assert misattributed_numbers("Dial extension 4333.", PASSAGES, "what's the SSO's number?") == []  # the right one
    both = "is it the site manager or the storage expert I call?"  # two people asked about: not judged
    assert misattributed_numbers("Dial extension 4999.", PASSAGES, both) == []


def test_the_right_person_an_acronym_the_sources_spell_out_and_a_sentence_naming_nobody_pass():
    for right in (
        "[1] Call the SSO first on extension 4333.",  # "Site Security Officer (SSO)"
        "Page the Site Security Officer (extension 4333).",
        "If the SSO does not answer, page the On-call Site Administrator (extension 4111).",
        "Call the NOC on extension 4222.",
        "call 4333 now",  # names nobody: not judged
        "The Storage Expert is on extension 4555.",  # in no source: the specifics check flags it
        "Job 4333 of the Storage Expert failed.",  # an id, not a contact
    ):
        assert misattributed_numbers(right, PASSAGES) == [], right


def test_an_internal_extension_is_a_phone_number_found_only_when_a_source_has_it():
    items = {i.text: (i.kind, i.found) for i in check_specifics("Call the Storage Expert on extension 4444.", [MATRIX])}
    assert items == {"4444": ("phone", False)}
    assert check_specifics("[1] Page the SSO (ext. 4333).", [MATRIX])[0].found
    assert check_specifics("Facilities Duty (4999) and the NOC, every time.", [MATRIX]) == []  # no contact word
    assert check_specifics("Call the helpdesk again in 2026.", [MATRIX]) == []  # a year
    assert check_specifics("The call returned 404.", [MATRIX]) == []  # "call" alone makes no extension
    assert check_specifics("Retry the call after 300 seconds.", [MATRIX])[0].kind == "quantity"


def test_every_front_end_warns_of_the_number_above_the_answers_notes(tiny_engine, monkeypatch):
    kept = ("| Role", "| On-call", "| Storage E", "| Site S")
    rows = "\n".join(line for line in MATRIX.splitlines() if line.startswith(kept))
    docs = [("escalation-matrix.md", rows)]  # the contact table: the tiny model's prompt holds no whole page
    options = CopilotOptions(answer=AnswerOptions(gate="off", passages=1))
    copilot = Copilot(loading.load_engine(ModelOptions()), options, FakeRetriever(docs))
    script_answer(copilot, monkeypatch, WRONG)
    final = collect(copilot.answer("What is the Storage Expert's phone extension?"))
    assert check_notes(final, str)[0] == ("warning", definition(final.definitions[0], str))  # first, a warning
    html = details_html(final)
    assert html.count("4333 is the number [1]") == 1 and "⚠ 4333 is the number [1]" in html  # a warning, once
