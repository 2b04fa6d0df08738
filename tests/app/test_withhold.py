"""An answer naming a phone number or email address that no source has is withheld, in every front end."""

import dataclasses

import pytest
from copilot_fakes import FakeRetriever, script_answer

from app.cli import main
from app.copilot import AnswerOptions, Copilot, CopilotOptions, GroundingItem, ModelOptions, collect, loading
from app.copilot import pipeline as pipeline_module
from app.copilot.abstention import abstains
from app.copilot.events import Passage, Token
from app.copilot.grounding import check_grounding
from app.copilot.pipeline import final_from_text
from app.copilot.withhold import (
    WITHHELD,
    ContactGuard,
    UnsourcedSubjectCheck,
    own_site_question,
    unsourced_settings,
    withheld_notice,
)
from app.eval.questions import Question
from app.eval.runner import answer_record
from app.web.session import Exchange

PASSAGES = [
    "The Slurm User Group Meeting 2023 is held at Brigham Young University.",
    "Report outages to the operations desk at +41 22 767 1111 or ops-desk@example.org.",
]


def notice_for(answer: str, question: str = "Who is on call tonight?") -> str:
    return withheld_notice(check_grounding(answer, PASSAGES, question))


def test_an_invented_phone_or_email_withholds_the_answer_and_the_notice_abstains():
    phone = notice_for("The on-call administrator is Doug Jacobsen [1]. His pager number is 555-1234 [2].")
    assert phone.startswith(WITHHELD) and "a phone number" in phone and "555-1234" not in phone
    assert abstains(phone)  # the eval scores the notice as the user saw it
    email = notice_for("Write to oncall@cluster.example.org [2].")
    assert "an email address" in email and "oncall@" not in email


def test_an_invented_version_or_address_withholds_the_answer_too():
    version = notice_for("CUDA 12 needs driver 470.30.0 [1].", "Which driver does CUDA 12 need?")
    assert version.startswith(WITHHELD) and "a version or address" in version and "470" not in version
    assert "Look the version up" in version and abstains(version)
    both = notice_for("Page 555-1234, or ssh to 10.1.2.3 [1].")
    assert "a phone number and a version or address" in both and "Look the contact or version up" in both
    assert notice_for("The meeting in 2023 [1] ran 23.11.1 on 10.1.2.3.", "What runs on 10.1.2.3 (23.11.1)?") == ""


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_a_streamed_invented_version_never_reaches_the_screen(chunk):
    shown, guard = streamed("Install driver 470.30.0 first [1], then reboot.", chunk)
    assert guard.notice.startswith(WITHHELD) and "470" not in shown and shown.startswith("Install driver")


def test_contacts_the_sources_or_the_question_give_are_shown():
    assert notice_for("Call the operations desk at +41 22 767 1111 or write to ops-desk@example.org [2].") == ""
    assert notice_for("Page 555 0134 as you asked [1].", "Should I page 555-0134 for this?") == ""


def streamed(answer: str, chunk: int, question: str = "Who is on call tonight?") -> tuple[str, ContactGuard]:
    """What a guard lets through of `answer` fed `chunk` characters at a time, and the guard."""
    guard = ContactGuard(PASSAGES, question)
    shown = "".join(guard.feed(answer[i : i + chunk]) for i in range(0, len(answer), chunk))
    return shown + guard.flush(), guard


@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_a_streamed_answer_is_shown_whole_when_its_contacts_are_in_the_sources(chunk):
    for answer in [
        "Call the desk at +41 22 767 1111 now, or write to ops-desk@example.org [2].",  # never cut short at "+41 22"
        # job ids in code, inline and fenced
        "Run `sacct -j 12345678 --format=JobID,State` [1], then:\n```\nsacct -j 87654321\n```\nDone.",
        "Page 555 0134 as you asked [1].",
    ]:
        shown, guard = streamed(answer, chunk, "Should I page 555-0134?")
        assert shown == answer and not guard.notice


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_a_streamed_invented_contact_never_reaches_the_screen(chunk):
    for answer, hidden in [
        ("His pager number is 555-1234 [2]. Call him at night.", "555"),
        ("Page (555) 123 4567 now.", "555"),
        ("Write to oncall@cluster.example.org [2] today.", "oncall"),
    ]:
        shown, guard = streamed(answer, chunk)
        assert guard.notice.startswith(WITHHELD) and hidden not in shown and answer.startswith(shown)
        assert guard.feed(" more words") == "" and guard.flush() == ""  # tripped for good


def test_a_long_word_or_unspaced_text_is_held_only_while_it_may_still_become_a_contact():
    guard = ContactGuard(PASSAGES, "q")
    assert guard.feed("Restart slurmctld") == "Restart "  # the last word may yet gain an @
    assert guard.feed(": ok") == "slurmctld: "
    assert guard.feed("\x11:\x11") == "ok\x11:\x11"  # no word or number can grow out of these


def test_other_unfound_specifics_stay_flags_on_a_shown_answer():
    answer = "Drain it for 45 minutes with `scontrol drain` and tell Doug Jacobsen [1]."
    items = check_grounding(answer, PASSAGES, "How do I drain a node?")
    assert any(not item.found for item in items)  # flagged ...
    assert withheld_notice(items) == ""  # ... but not withheld: claims to check, not an address to use


CVMFS = [  # on the question's topic, but none names the setting it asks about
    "Check the mount with `cvmfs_config probe atlas.cern.ch`; a slow stratum-1 shows as timeouts in the log.",
    "Set CVMFS_HTTP_PROXY in /etc/cvmfs/default.local; wipe the cache with `cvmfs_config wipecache`.",
]
TIMEOUT_QUESTION = "what is CVMFS_TIMEOUT set to on our worker nodes? are slow fetches timing out too early?"


def final_for(answer: str, passages: list[str] = CVMFS, question: str = TIMEOUT_QUESTION):
    shown = [Passage(n, text, f"cvmfs-{n}.md") for n, text in enumerate(passages, 1)]
    return final_from_text(question, shown, answer, "eos")


def test_the_settings_a_question_asks_about_are_unsourced_when_no_passage_names_them():
    assert unsourced_settings(TIMEOUT_QUESTION, CVMFS) == ["CVMFS_TIMEOUT"]
    assert unsourced_settings(TIMEOUT_QUESTION, [*CVMFS, "cvmfs_timeout: seconds before a fetch fails"]) == []
    # keys are CamelCase or snake: a plural acronym is not one, a key the sources name is not unsourced
    assert unsourced_settings("How many GPUs, and is MaxJobCount or CVMFS_HTTP_PROXY set?", CVMFS) == ["MaxJobCount"]


def test_a_value_given_for_a_setting_no_source_names_withholds_the_answer():
    answer = "[1] CVMFS_TIMEOUT is set to 10 seconds on our worker nodes. Slow fetches may time out too early."
    final = final_for(answer)
    assert final.withheld.startswith(WITHHELD) and "CVMFS_TIMEOUT" in final.withheld and "10" not in final.withheld
    assert abstains(final.shown) and "10 seconds" not in final.shown
    # in code, the setting's name counts too; the same words over a source that names it are the source's to check
    assert final_for("[1] `CVMFS_TIMEOUT` is 10 seconds here.").withheld.startswith(WITHHELD)
    assert final_for("[1] CVMFS_TIMEOUT is set to 10 on our nodes.").withheld.startswith(WITHHELD)  # a bare number
    named = [*CVMFS, "CVMFS_TIMEOUT sets how long a fetch may take; the site's value is in default.local."]
    assert UnsourcedSubjectCheck(named, TIMEOUT_QUESTION).notice(answer) == ""
    # still withheld: a value no source has, for a question about the site's own nodes (own_site_notice)
    assert "your own site" in final_for(answer, named).withheld


STATS = [  # HAProxy's configuration manual: a credential in an example, and the word "password" in prose
    "listen stats\n    stats uri /admin?stats\n    stats auth admin1:AdMiN123\n    stats auth admin2:AdMiN321",
    "The password file is read at start; userlist L1 has user tiger password $6$k6y3o.eP$JlKBx9za966ud67q",
]
STATS_QUESTION = "What is the login for the stats page on our production HAProxy?"


def test_a_credential_from_an_example_given_as_the_sites_withholds_the_answer():
    answer = "[1] The login for the stats page on our production HAProxy is admin1:AdMiN123."
    final = final_for(answer, STATS, STATS_QUESTION)
    assert final.withheld.startswith(WITHHELD) and "credential" in final.withheld and "AdMiN" not in final.withheld
    assert abstains(final.shown) and "AdMiN123" not in final.shown
    for other in (
        "[2] Log in as tiger with the password $6$k6y3o.eP$JlKBx9za966ud67q.",
        "[1] The address is `http://lb1:80/admin?stats`, and the login is `admin1:AdMiN123`.",  # as code, bare
    ):
        assert final_for(other, STATS, STATS_QUESTION).withheld.startswith(WITHHELD), other
    for shown in (  # the example shown as the documentation's, in code; plain words after "password"
        "[1] Protect the page with a line such as:\n\n```\nstats auth admin1:AdMiN123\n```\n",
        "[1] Use `stats auth <user>:<password>`, as in `stats auth admin1:AdMiN123`.",
        "[2] The password file is read at start.",
    ):
        assert final_for(shown, STATS, STATS_QUESTION).withheld == "", shown


def test_an_answer_that_gives_no_value_for_the_unsourced_setting_is_shown():
    for answer in [
        "[1] The sources do not give CVMFS_TIMEOUT. Check the log for timeouts with `cvmfs_config probe`.",
        "[1] CVMFS_TIMEOUT is not in the sources. Slow stratum-1 fetches show up after 10 seconds [1].",
        "[1] Read it on a node:\n```\ngrep CVMFS_TIMEOUT=10 /etc/cvmfs/default.local\n```",
    ]:
        assert final_for(answer).withheld == "", answer
    # a bare number a source holds is that source's
    retries = [*CVMFS, "A failed fetch is retried 3 times before the job sees an error."]
    assert final_for("[3] CVMFS_TIMEOUT is not given; a fetch is retried 3 times.", retries).withheld == ""


RESTARTS = [  # Apache's manual on restarts: nothing of any site's own schedule or files
    "A graceful restart lets the children finish their current requests: `apache2ctl -k graceful`.",
    "The server can be stopped with `apache2ctl -k stop`; the error log records the restart.",
]
WINDOW_QUESTION = "What is our team's approved maintenance window for restarting the production Apache cluster?"


def test_a_value_no_source_has_for_a_question_about_the_own_site_withholds_the_answer():
    final = final_for("[1] The approved maintenance window is 02:00 to 04:00 [2].", RESTARTS, WINDOW_QUESTION)
    assert final.withheld.startswith(WITHHELD) and "your own site" in final.withheld
    assert abstains(final.shown) and "02:00" not in final.shown
    where = "Where do we keep the TLS certificate for the customer portal, and when does it expire?"
    kept = "[1] It is kept in `/etc/ssl/certs`. It expires after 90 days [2]."
    assert final_for(kept, RESTARTS, where).withheld.startswith(WITHHELD)
    # a path alone is a place to look, flagged as a path, not withheld as the site's value
    assert final_for("[1] It is kept in `/etc/ssl/certs` [2].", RESTARTS, where).withheld == ""
    for answer in (  # no value unfound, or the answer says the sources lack it
        "[1] The sources give no window; restart gracefully with `apache2ctl -k graceful`.",
        "[2] The sources do not cover your team's maintenance window.",
        "[1] The window is not in the sources; restarts are logged, e.g. at 02:00 [2].",
        "[1] Ask the team; a restart that keeps downloads is `apache2ctl -k restart-graceful` [1].",  # unfound code
    ):
        assert final_for(answer, RESTARTS, WINDOW_QUESTION).withheld == "", answer
    # the same invented times for a question that asks how, not for a fact of the site: flagged and shown
    how = "How do I restart our Apache without cutting off downloads?"
    final = final_for("[1] Run `apache2ctl -k graceful`, best between 02:00 and 04:00.", RESTARTS, how)
    assert final.withheld == "" and "02:00" in {item.text for item in final.ungrounded}


def test_a_fact_of_the_own_site_asked_in_a_later_clause_or_as_how_much_is_an_own_site_question():
    # fresh6 `s6-19` (development half, session 44): the sign-off and "24 hours" notice were invented and shown
    reservation = (
        "Before I put a maintenance reservation on the whole cluster, who do I need to get sign-off from, "
        "and how much notice do we have to give users?"
    )
    for question in (
        reservation,
        "How many core-hours has the physics account been granted under our allocation policy?",
        "How long do we keep job records on our cluster?",
    ):
        assert own_site_question(question), question
    for question in (  # a way to do something, or a "we" that is not asked about
        "How do I restart our Apache without cutting off downloads?",
        "If we drain a node, what happens to its jobs?",
        "After we drained it, which command shows the reason?",
        "How long does Slurm keep job records by default?",
    ):
        assert not own_site_question(question), question
    invented = "[5] You need sign-off from the coordinator of the cluster. You have 24 hours to give users notice."
    final = final_for(invented, RESTARTS, reservation)
    assert final.withheld.startswith(WITHHELD) and "24 hours" not in final.shown


@pytest.mark.parametrize("chunk", [1, 3, 8])
def test_a_streamed_own_site_value_never_reaches_the_screen(chunk):
    answer = "[1] Restart gracefully. The approved maintenance window is 02:00 to 04:00 [2]. Tell the team."
    guard = ContactGuard(RESTARTS, WINDOW_QUESTION)
    shown = "".join(guard.feed(answer[i : i + chunk]) for i in range(0, len(answer), chunk))
    assert shown == "[1] Restart gracefully. " and not guard.notice  # whole sentences, up to the value's
    assert guard.flush() == "" and guard.notice.startswith(WITHHELD) and not guard.tripped  # decided at the end


@pytest.mark.parametrize("chunk", [1, 5])
def test_an_own_site_answer_that_says_the_sources_lack_the_value_is_shown_once_it_has_said_so(chunk):
    answer = "[1] Restarts are logged at 02:00 [2]. Your window is not in the sources."
    guard = ContactGuard(RESTARTS, WINDOW_QUESTION)
    held = "".join(guard.feed(answer[i : i + chunk]) for i in range(0, len(answer), chunk))
    assert held == "" and held + guard.flush() == answer and not guard.notice
    # any other question streams as before, within its sentences
    other = ContactGuard(RESTARTS, "How do I restart Apache without cutting off downloads?")
    assert other.feed(answer[:24]) == answer[:24]


def test_the_pipeline_withholds_an_own_site_value_when_the_answer_has_ended(tiny_engine, monkeypatch):
    retriever = FakeRetriever([("restart.html", RESTARTS[0]), ("stop.html", RESTARTS[1])], heading="Restarts")
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(gate="off")), retriever)
    answer = "[1] Restart gracefully. The approved window is 02:00 to 04:00 [2]. Tell the team first."
    generated, _ = script_answer(copilot, monkeypatch, answer)
    events = list(copilot.answer(WINDOW_QUESTION))
    final, shown = events[-1], "".join(e.text for e in events if isinstance(e, Token))
    assert "02:00" not in shown and "your own site" in final.withheld and "02:00" not in final.shown
    assert final.finish_reason != "withheld"  # not stopped: the whole answer was read before deciding
    assert copilot.engine.tokenizer.decode(generated) == final.answer == answer


NODES = [  # Slurm's side of node maintenance: no word of the vendor tool the question asks about
    "Return a node to service with `scontrol update NodeName=cn042 State=RESUME`.",
    "A node's Reason field records why it was drained.",
]
SEL_QUESTION = "How do I clear the BMC event log with ipmitool on a Dell node before I resume it?"


def test_a_command_of_a_tool_the_question_names_and_no_source_does_withholds_the_answer():
    for answer in [
        "[1] Clear it first:\n```\nipmitool sel clear\n```\nThen resume the node [1].",
        "[1] Run `sudo ipmitool sel clear`, then resume the node [1].",
        "[2] Clear the log:\n```\n$ ipmitool -I lanplus sel clear\n```",
    ]:
        final = final_for(answer, NODES, SEL_QUESTION)
        assert final.withheld.startswith(WITHHELD) and "a command of ipmitool" in final.withheld, answer
        assert abstains(final.shown) and "sel clear" not in final.shown
    # the tool named by a source, only named in prose, or not asked about: a claim to check, still shown
    assert (
        final_for("[1] Run `ipmitool sel clear`.", [*NODES, "Use ipmitool for the BMC."], SEL_QUESTION).withheld == ""
    )
    assert final_for("[1] The sources do not say how to use ipmitool.", NODES, SEL_QUESTION).withheld == ""
    assert final_for("[1] Run `curl -s http://bmc/log`.", NODES, SEL_QUESTION).withheld == ""
    # a lone word in code is a name, not a command line (`ipmitool`; a directory, as in an array answer)
    assert final_for("[1] The `ipmitool` and `Dell` tools are not in the sources.", NODES, SEL_QUESTION).withheld == ""


@pytest.mark.parametrize("chunk", [1, 4])
def test_a_streamed_command_of_an_unsourced_tool_stops_at_its_name(chunk):
    answer = "[1] Clear it first:\n```\nipmitool sel clear\n```\nThen resume the node [1]."
    guard = ContactGuard(NODES, SEL_QUESTION)
    shown = "".join(guard.feed(answer[i : i + chunk]) for i in range(0, len(answer), chunk)) + guard.flush()
    assert guard.notice.startswith(WITHHELD) and "sel clear" not in shown and answer.startswith(shown)


@pytest.mark.parametrize("chunk", [1, 3, 8])
def test_a_streamed_value_for_an_unsourced_setting_never_reaches_the_screen(chunk):
    answer = "[1] CVMFS_TIMEOUT is set to 10 seconds on our worker nodes. More."
    guard = ContactGuard(CVMFS, TIMEOUT_QUESTION)
    shown = "".join(guard.feed(answer[i : i + chunk]) for i in range(0, len(answer), chunk)) + guard.flush()
    assert guard.notice.startswith(WITHHELD) and "10" not in shown and answer.startswith(shown)


@pytest.fixture
def invented_contact(monkeypatch):
    """Every answer is graded as if it named a made-up pager number."""
    real = pipeline_module.check_grounding
    invented = GroundingItem("555-1234", "phone", False)
    monkeypatch.setattr(pipeline_module, "check_grounding", lambda *args: [*real(*args), invented])


@pytest.fixture
def withholding_copilot(tiny_engine, invented_contact):
    """The tiny model's words, graded as naming a made-up pager number."""
    retriever = FakeRetriever([("oncall.md", PASSAGES[0]), ("desk.md", PASSAGES[1])], heading="Contacts")
    options = CopilotOptions(answer=AnswerOptions(max_new_tokens=16, gate="off"))
    return Copilot(loading.load_engine(ModelOptions()), options, retriever)


def test_the_pipeline_keeps_the_generated_words_but_hands_on_the_notice(withholding_copilot):
    events = list(withholding_copilot.answer("Who is on call tonight?"))
    final = events[-1]
    assert final.withheld.startswith(WITHHELD) and final.shown == final.withheld
    assert "".join(e.text for e in events[1:-1] if hasattr(e, "token_ids")) == final.answer  # still exact
    assert final.turn.answer == final.withheld and final.turn.refused  # no follow-up builds on the invention
    follow_up = collect(withholding_copilot.answer("And their email?", [final.turn]))
    prompt = withholding_copilot.engine.tokenizer.decode(follow_up.prompt_ids)
    assert final.withheld in prompt and (len(final.answer) < 8 or final.answer not in prompt)


def test_the_web_chat_shows_the_notice_and_no_provenance_of_the_withheld_words(withholding_copilot):
    exchange = Exchange("Who is on call tonight?")
    for event in withholding_copilot.answer(exchange.question):
        exchange.apply(event)
    contents = [m["content"] for m in exchange.messages()]
    warning, answer = contents[-1].split("\n\n", 1)  # the warning heads the answer's own message
    assert "withheld" in warning and "sr-error" in warning and len(contents) == 3  # question, status, answer
    assert answer.startswith(exchange.final.withheld) and "sr-prov" not in answer
    assert "555-1234" not in answer and "cited" not in answer  # neither the invention nor what it cited
    assert not any(s["cited"] for s in exchange.final.sources) and exchange.final.sources


def test_the_eval_scores_what_the_user_saw(withholding_copilot):
    final = collect(withholding_copilot.answer("Who is on call tonight?"))
    final = dataclasses.replace(final, answer=f"{final.answer} sinfo-zq9")  # the keyword is in the hidden words
    record = answer_record(final, Question("q1", "Who is on call tonight?", keywords=("sinfo-zq9",)))
    assert record["withheld"] == final.withheld and record["keyword_recall"] == 0.0


def test_ask_prints_the_notice_after_the_streamed_words(tiny_engine, invented_contact, capsys, tmp_path):
    context = tmp_path / "oncall.txt"
    context.write_text(PASSAGES[0])
    assert main(["ask", "Who is on call tonight?", "--context-file", str(context), "--max-new-tokens", "8"]) == 0
    out = capsys.readouterr().out
    assert f"⚠ WITHHELD: {WITHHELD}" in out


def test_the_pipeline_stops_at_an_invented_contact_and_never_streams_it(tiny_engine, monkeypatch):
    retriever = FakeRetriever([("oncall.md", PASSAGES[0]), ("desk.md", PASSAGES[1])], heading="Contacts")
    copilot = Copilot(loading.load_engine(ModelOptions()), CopilotOptions(answer=AnswerOptions(gate="off")), retriever)
    answer = "The on-call administrator is Doug [1]. His pager is 555-1234 [2]. " + "Call him any time. " * 10
    generated, closed = script_answer(copilot, monkeypatch, answer)
    events = list(copilot.answer("Who is on call tonight?"))
    final, shown = events[-1], "".join(e.text for e in events if isinstance(e, Token))
    assert final.finish_reason == "withheld" and final.withheld.startswith(WITHHELD)
    assert "555" not in shown and "Doug [1]" in shown  # the words before the number did stream
    ids = copilot.engine.tokenizer(answer, add_special_tokens=False)["input_ids"]
    assert closed and len(generated) < len(ids) / 2  # generation stopped at the number
    assert final.answer == copilot.engine.tokenizer.decode(generated)  # the generated words, unchanged


@pytest.mark.parametrize("chunk", [1, 3, 50])
def test_an_invented_internal_extension_is_withheld_and_one_the_sources_give_is_shown(chunk):
    """Site runbooks reach people on 4-digit extensions ("Extension **4333**"); one a passage lacks is as
    invented as a full number (session 57)."""
    assert notice_for("Call the storage team on extension 4444 [2].").startswith(WITHHELD)
    assert notice_for("Call the operations desk on extension 1111 [2].") == ""  # the passage's number ends so
    shown, guard = streamed("Ring the desk: phone extension 4444, then wait.", chunk)
    assert guard.notice.startswith(WITHHELD) and "4444" not in shown
