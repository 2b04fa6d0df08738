"""A contact number the sources give for someone else withholds the answer; an extension they lack is a phone number."""

from pathlib import Path

from copilot_fakes import FakeRetriever, script_answer

from app.copilot import AnswerOptions, Copilot, CopilotOptions, ModelOptions, Passage, Token, loading
from app.copilot.contacts import misattributed_numbers
from app.copilot.specifics import check_specifics
from app.copilot.summary import check_notes
from app.copilot.withhold import WITHHELD, ContactGuard, misattributed_notice
from app.slack.render import to_mrkdwn
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
    assert misattributed_notice(WRONG, PASSAGES, "") == (
        f"{WITHHELD} gave Storage Expert a number that [1] (Escalation Matrix and Incident Priorities) gives for "
        "Site Security Officer, so it is not shown. Look up how to reach Storage Expert in the sources below."
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


def test_a_sentence_naming_nobody_is_judged_against_whom_the_question_wants_a_number_for():
    # a blind runbook set (session 59): no runbook gives the electricity provider; 4222 is the NOC's
    asked = "What is the phone number of the electricity provider for the data centre?"
    answer = "[4] The electricity provider for the data centre is the Campus NOC. Extension 4222 [4]."
    [told] = misattributed_numbers(answer, PASSAGES, asked)
    assert (told.said_of, told.term, told.quoted) == (
        "the electricity provider",
        "Campus Network Operations Centre",
        "4222",
    )
    assert "gave the electricity provider a number that [1]" in misattributed_notice(answer, PASSAGES, asked)
    for right in (
        "What is the extension of the network operations centre?",
        "Give me the NOC's number",
        "whom do I call?",
    ):
        assert misattributed_numbers("[1] Extension 4222.", PASSAGES, right) == [], right


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


def _contact_copilot(tiny_engine, monkeypatch, answer: str) -> tuple[Copilot, list[int]]:
    kept = ("| Role", "| On-call", "| Storage E", "| Site S")
    rows = "\n".join(line for line in MATRIX.splitlines() if line.startswith(kept))
    docs = [("escalation-matrix.md", rows)]  # the contact table: the tiny model's prompt holds no whole page
    options = CopilotOptions(answer=AnswerOptions(gate="off", passages=1))
    copilot = Copilot(loading.load_engine(ModelOptions()), options, FakeRetriever(docs))
    generated, _ = script_answer(copilot, monkeypatch, answer)
    return copilot, generated


def test_a_number_given_for_someone_else_never_streams_and_every_front_end_shows_the_notice(tiny_engine, monkeypatch):
    answer = WRONG + " Call them any time, day or night." * 8
    copilot, generated = _contact_copilot(tiny_engine, monkeypatch, answer)
    events = list(copilot.answer("What is the Storage Expert's phone extension?"))
    final, streamed = events[-1], "".join(e.text for e in events if isinstance(e, Token))
    assert final.finish_reason == "withheld" and "gave Storage Expert a number that [1]" in final.withheld
    assert "4333" not in streamed and "4333" not in final.withheld  # neither streamed nor repeated
    assert final.shown == final.withheld and final.turn.answer == final.withheld  # no follow-up builds on it
    assert len(generated) < len(copilot.engine.tokenizer(answer)["input_ids"]) / 2  # generation stopped there
    html = details_html(final)  # the sources stay listed (their own text gives 4333 for the SSO), no provenance
    assert "sr-prov" not in html and "escalation-matrix.md" in html and not check_notes(final, str)
    assert "4333" not in to_mrkdwn(final.shown) and "Storage Expert a number" in to_mrkdwn(final.shown)


def test_the_number_of_the_person_asked_about_streams_once_its_sentence_ends(tiny_engine, monkeypatch):
    answer = "[1] Call the SSO first on extension 4333. Then page the On-call Site Administrator."
    copilot, _ = _contact_copilot(tiny_engine, monkeypatch, answer)
    events = list(copilot.answer("Whom do I call about a security incident?"))
    final, streamed = events[-1], "".join(e.text for e in events if isinstance(e, Token))
    assert not final.withheld and streamed == answer


def test_a_sentence_with_a_contact_number_is_held_until_it_ends_and_whom_it_names_is_known():
    texts = [p.text for p in PASSAGES]
    for person, withheld in (("the SSO", False), ("the Storage Expert", True)):
        guard = ContactGuard(texts, "", PASSAGES, "")
        shown = guard.feed(f"[1] Call {person} first on extension ")
        assert shown.startswith("[1] Call")  # the words before a number stream
        shown += guard.feed("4333 today, then")  # whose number? not known yet
        assert "4333" not in shown
        shown += guard.feed(" wait for the callback. More")
        assert ("4333" in shown) is not withheld and guard.tripped is withheld


def test_a_name_wrapped_over_a_line_break_is_the_person_the_number_is_given_for():
    """The v-01 probe (session 58): a right answer was withheld, its "On-call Site Administrator" read apart."""
    fts = Passage(
        2,
        "## Escalation\n\n- Success rate under 70 % for more than one hour: **P2**, page the On-call\n"
        "  Site Administrator (extension 4111).\n- Door problems: helpdesk ticket for the Storage\n  Expert.\n",
        "fts-transfers-stuck-or-failing.md",
        "Stuck or Failing FTS Transfers",
    )
    right = "[2] Success rate under 70 % for an hour: **P2**, page the On-call Site Administrator (extension 4111)."
    assert misattributed_numbers(right, [fts]) == []
    [told] = misattributed_numbers("[2] Page the Storage Expert (extension 4111).", [fts])
    assert (told.said_of, told.term, told.quoted) == ("Storage Expert", "On-call Site Administrator", "4111")
