"""A sentence that carries the prompt's worked example (backups) into an answer no source backs is warned of."""

import json

from app.copilot.borrowed import EXAMPLE_TOPIC, _stems, borrowed_sentences
from app.copilot.events import Passage
from app.copilot.pipeline import final_from_text
from app.copilot.prompting import DEMONSTRATION
from app.copilot.summary import check_notes
from app.web.render import grounding_html

FAQ = Passage(1, "Change the earliest begin time with scontrol update JobId=1234 StartTime=now.", "faq.html", "FAQ")
QUESTION = "How do I put a user's job on hold so it does not start?"
SEEN = (  # the chat's answer, session 23
    "[1] Change the earliest begin time of the job:\n\n```\nscontrol update JobId=1234 StartTime=now\n```\n\n"
    "This will put the job on hold until the next scheduled backup [1]."
)


def test_every_topic_word_is_the_demonstrations_own():
    demonstration = _stems(json.dumps(DEMONSTRATION))
    assert all(_stems(word) <= demonstration for word in EXAMPLE_TOPIC)


def test_a_sentence_on_the_examples_topic_is_reported_only_when_nothing_else_brought_it_up():
    sentence = "This will put the job on hold until the next scheduled backup [1]."
    assert borrowed_sentences(SEEN, [FAQ.text], QUESTION) == [(sentence, "backup")]
    assert borrowed_sentences(SEEN, [FAQ.text, "The backup controller takes over."], QUESTION) == []
    assert borrowed_sentences(SEEN, [FAQ.text], "Can I restore a job's script?") == []  # the user's topic
    in_code = "[1] Run it:\n\n```\nbkp restore --snapshot latest\n```"
    assert borrowed_sentences(in_code, [FAQ.text], QUESTION) == []  # code is the grounding check's


def test_the_front_ends_warn_of_it_and_a_withheld_answer_shows_nothing_of_it():
    final = final_from_text(QUESTION, [FAQ], SEEN, "eos")
    assert [word for _, word in final.borrowed] == ["backup"]
    warnings = [text for level, text in check_notes(final, code=str) if level == "warning"]
    assert any("which only the prompt's worked example does: it is not from the sources" in w for w in warnings)
    assert "only the prompt&#x27;s worked example does" in grounding_html(final.grounding, (), (), (), final.borrowed)
    uncited = final_from_text(QUESTION, [FAQ], SEEN.replace("[1]", ""), "eos", withheld="withheld: cited nothing")
    assert uncited.withheld and uncited.borrowed == []
