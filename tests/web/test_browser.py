"""The web chat in a real browser: Playwright drives Debian's headless Chromium against `specrag chat`.

Runs where /usr/bin/chromium and the playwright package are installed (CI: apt-get install
chromium; pip install .[test]); never downloads a browser. Screenshots go to
$SPECRAG_TEST_ARTIFACTS (else a tmp folder) and their paths are printed.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest
from artifacts import artifacts_dir
from chat_process import running_chat
from chromium import ARGS, CHROMIUM

LAST_ANSWER_JS = """() => {
  const bots = [...document.querySelectorAll('#sr-chat [data-testid="bot"]')];
  const answers = bots.filter(b => b.innerText.includes('Cwm'));
  if (!answers.length) return '';
  const last = answers[answers.length - 1], details = last.querySelector('.sr-details');
  return (details ? last.innerText.replace(details.innerText, '') : last.innerText).trim();
}"""

ANSWER_COUNT_JS = """() => [...document.querySelectorAll('#sr-chat [data-testid="bot"]')]
  .filter(b => b.innerText.includes('Cwm')).length"""


@pytest.fixture(scope="module")
def browser():
    # A missing browser fails the module (never skips it): the README's test command installs it.
    if not CHROMIUM.exists():
        pytest.fail("the browser tests need Debian's chromium: apt-get install -y chromium")
    from playwright import sync_api as playwright_sync

    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(browser, chat_server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(chat_server[0])
    page.wait_for_selector(".sr-ready", timeout=120_000)
    yield page
    context.close()


def shoot(page, chat_server, name: str) -> None:
    path = artifacts_dir(chat_server[2]) / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def ask(page, question: str) -> None:
    page.fill("#sr-question textarea", question)
    page.click("#sr-ask")


def details_count(page) -> int:
    return page.locator("#sr-chat .sr-details").count()


def wait_for_details(page, count: int, timeout_s: float = 90) -> None:
    page.wait_for_function(
        f"document.querySelectorAll('#sr-chat .sr-details').length >= {count}", timeout=timeout_s * 1000
    )


def votes(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT rating, question, answer, models FROM feedback").fetchall()


def stop_enabled(page) -> bool:
    return page.locator("#sr-stop").is_enabled()


def test_answer_streams_then_shows_sources_stats_and_provenance(page, chat_server):
    before = details_count(page)
    assert not stop_enabled(page), "Stop is live before anything was asked"
    ask(page, "How do I rotate the glyph bank?")
    page.wait_for_selector("#sr-stop:enabled", timeout=30_000)  # live while the answer runs
    lengths = []
    deadline = time.monotonic() + 90
    while details_count(page) == before and time.monotonic() < deadline:
        lengths.append(len(page.evaluate(LAST_ANSWER_JS)))
        time.sleep(0.1)
    assert len({n for n in lengths if n > 0}) >= 2, f"answer never seen growing: {lengths}"
    details = page.locator("#sr-chat .sr-details").last
    assert "glyphs.md" in details.locator(".sr-sources").inner_text()
    assert re.search(
        r"\d+ tokens · [\d.]+ tok/s · [\d.]+ tokens/pass · copied \d+% .*first token", details.inner_text()
    )
    # the server drafts on the flat curve the fixture wrote, not on one it measured (under load: no drafts)
    calibrated = json.loads((chat_server[2] / "home" / "calibration.json").read_text())
    assert len(calibrated) == 1, f"the server measured a pass-cost curve of its own: {calibrated}"
    assert details.locator(".prov sup").count() >= 1, f"no provenance marks: {details.inner_text()!r}"
    assert "Copied verbatim from source" in details.locator(".sr-legend").inner_text()
    details.locator(".sr-source summary").first.click()  # the chunk text on expand
    assert "rotation phrase of the glyph bank" in details.locator(".sr-chunk").first.inner_text()
    page.wait_for_selector("#sr-stop:disabled", timeout=10_000)  # and off again once it has ended
    shoot(page, chat_server, "01-answer")


def test_thumbs_up_is_stored_in_sqlite(page, chat_server):
    db = chat_server[1]
    page.fill("#sr-comment textarea", "right page")
    page.locator('#sr-chat button[aria-label="Like"]').last.click()
    deadline = time.monotonic() + 15
    while not votes(db) and time.monotonic() < deadline:
        time.sleep(0.2)
    rows = votes(db)
    assert rows and rows[-1][0] == "up" and rows[-1][1] == "How do I rotate the glyph bank?"
    assert "Cwm_fjord" in rows[-1][2] and "tiny-chat-model" in rows[-1][3]
    page.wait_for_selector("#sr-feedback-note:has-text('saved')", timeout=10_000)


def test_follow_up_uses_the_history(page, chat_server):
    count = details_count(page)
    ask(page, "And what comes after that?")
    wait_for_details(page, count + 1)
    assert "with 1 earlier turn" in page.locator("#sr-chat").inner_text()
    shoot(page, chat_server, "02-follow-up")


def test_stop_ends_a_long_answer_and_the_next_question_is_answered(page, chat_server):
    page.fill("#sr-max input[type=number]", "1024")
    page.press("#sr-max input[type=number]", "Enter")
    answers = page.evaluate(ANSWER_COUNT_JS)
    ask(page, "Read the whole glyph bank rotation out, please.")
    page.wait_for_function(f"({ANSWER_COUNT_JS})() > {answers} && ({LAST_ANSWER_JS})().length > 20", timeout=60_000)
    page.click("#sr-stop")
    stopped_at = time.monotonic()
    page.wait_for_selector("#sr-chat :text('stopped')", timeout=15_000)
    assert time.monotonic() - stopped_at < 10
    stopped = page.evaluate(LAST_ANSWER_JS)
    assert stopped.endswith("stopped") and 20 < len(stopped) < 900, f"not stopped mid-answer: {stopped!r}"
    shoot(page, chat_server, "03-stopped")
    page.fill("#sr-max input[type=number]", "96")
    page.press("#sr-max input[type=number]", "Enter")
    count = details_count(page)
    ask(page, "Where do munge keys live?")
    wait_for_details(page, count + 1)


def test_retry_reanswers_the_last_question_and_new_conversation_starts_afresh(page, chat_server):
    users = page.locator('#sr-chat [data-testid="user"]').count()
    page.fill("#sr-max input[type=number]", "48")
    page.press("#sr-max input[type=number]", "Enter")
    page.click("#sr-retry")
    page.wait_for_selector("#sr-chat .sr-stats:has-text('48 tokens')", timeout=60_000)
    assert page.locator('#sr-chat [data-testid="user"]').count() == users
    page.click("#sr-new")
    page.wait_for_function("document.querySelectorAll('#sr-chat [data-testid=\"user\"]').length === 0")
    assert not stop_enabled(page)
    ask(page, "Where do munge keys live?")
    wait_for_details(page, 1)
    assert "earlier turn" not in page.locator("#sr-chat").inner_text()


def test_two_users_at_once_both_answered_one_sees_its_queue_position(browser, chat_server):
    pages = []
    for _ in range(2):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        pages.append(context.new_page())
        pages[-1].goto(chat_server[0])
        pages[-1].wait_for_selector(".sr-ready", timeout=60_000)
    for i, page in enumerate(pages):
        ask(page, f"How do I rotate glyph bank {i + 1}?")
    queue_seen = False
    deadline = time.monotonic() + 120
    while not all(details_count(p) for p in pages) and time.monotonic() < deadline:
        for i, page in enumerate(pages):
            if not queue_seen and re.search(r"queue: \d+/\d+", page.locator("#sr-chat").inner_text()):
                queue_seen = True
                shoot(page, chat_server, f"04-queued-user-{i + 1}")
        time.sleep(0.1)
    assert all(details_count(p) == 1 for p in pages), "a queued question was lost"
    assert queue_seen, "no page showed its queue position"
    shoot(pages[0], chat_server, "05-two-users-answered")
    for page in pages:
        page.context.close()


def test_a_model_that_fails_to_load_is_shown_and_the_page_keeps_serving(browser, tmp_path):
    with running_chat(tmp_path, "--index", str(tmp_path / "none"), "--target", str(tmp_path / "no-model")) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".sr-failed:has-text('failed to load')", timeout=120_000)
        ask(page, "How do I drain a node?")
        page.wait_for_selector("#sr-chat .sr-error:has-text('the models failed to load')", timeout=60_000)
        assert "does not exist" in page.locator("#sr-chat .sr-error").inner_text()
        path = artifacts_dir(tmp_path) / "06-model-failed.png"
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        page.close()


def test_first_start_serves_the_page_at_once_and_shows_the_index_being_built(browser, chat_server, tmp_path):
    model = chat_server[2] / "tiny-chat-model"
    with running_chat(tmp_path, "--target", str(model), "--draft", "none") as url:  # no --index: the default one
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".sr-loading:has-text('building the bundled runbook index')", timeout=60_000)
        ask(page, "How do I drain a node?")
        page.wait_for_selector("#sr-chat :text('waiting for the models to load')", timeout=30_000)
        path = artifacts_dir(tmp_path) / "00-first-start-loading.png"
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        page.close()


def test_a_refused_question_is_answered_anyway_under_the_gates_warning(browser, chat_server, tmp_path):
    """The chat's relevance gate at its default (refuse) on the fixture index, whose MiniLM is calibrated."""
    model, index = chat_server[2] / "tiny-chat-model", chat_server[2] / "index"
    args = ["--index", str(index), "--target", str(model), "--draft", "none", "--max-new-tokens", "24"]
    with running_chat(tmp_path, *args, "--repeat-span", "0") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".sr-ready", timeout=120_000)
        assert not page.locator("#sr-anyway").is_enabled()  # nothing refused yet
        ask(page, "Which French painter lived in Giverny?")
        page.wait_for_selector("#sr-chat :text('do not cover this question')", timeout=60_000)
        page.wait_for_function("!document.querySelector('#sr-anyway').disabled", timeout=10_000)
        page.click("#sr-anyway")
        page.wait_for_selector("#sr-chat .sr-stats:has-text('24 tokens')", timeout=60_000)
        chat_text = page.locator("#sr-chat").inner_text()
        assert "may not cover this question" in chat_text and "do not cover this question" not in chat_text
        assert page.locator('#sr-chat [data-testid="user"]').count() == 1  # asked again, not asked twice
        page.wait_for_function("document.querySelector('#sr-anyway').disabled", timeout=10_000)
        path = artifacts_dir(tmp_path) / "07-answered-anyway.png"
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        page.close()
