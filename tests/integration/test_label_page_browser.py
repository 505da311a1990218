"""The labelling page in a real browser (Debian's chromium driven by Playwright) against `retbench label serve`.

A person's whole session: the name asked once, keyboard-only grading, skip, undo, the LLM grade hidden until
the answer is stored, the query terms marked in the document (untrusted text never parsed as HTML), the progress
bar and the live estimate moving; and a SIGKILL of the server mid-session, after which the page carries on and
labels.jsonl holds every stored event exactly once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import Stemmer

from browser import CHROMIUM
from label_page import WAIT_MS, press_and_wait_new_pair, shown, start_page
from label_study_data import write_study
from retbench.loopback import free_port, stop_process

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian's 'chromium')")

HOSTILE = '<img src=x onerror="document.title=\'owned\'"><script>document.title="owned"</script>'


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """The test study, with hostile markup in the first queued pair's document (documents are untrusted)."""
    path = write_study(tmp_path / "study")
    pairs = [json.loads(line) for line in (path / "pairs.jsonl").read_text().splitlines()]
    for pair in pairs:
        pair["doc_text"] += "\n" + HOSTILE
    (path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    return path


def _events(study: Path) -> list[dict]:
    path = study / "labels.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _llm(study: Path) -> dict[str, dict]:
    pairs = [json.loads(line) for line in (study / "pairs.jsonl").read_text().splitlines()]
    return {p["doc_id"] + "|" + p["qid"]: p for p in pairs}


def test_a_person_grades_skips_and_undoes_by_keyboard_and_sees_the_llm_grade_only_after_answering(browser, study):
    proc, url = start_page(study, 0)
    context = browser.new_context()
    try:
        page = context.new_page()
        replies: list = []
        page.on("response", lambda r: replies.append(r) if "/api/next" in r.url else None)
        page.goto(url)
        page.wait_for_selector("#name-input", timeout=WAIT_MS)
        page.keyboard.type("ann")
        page.keyboard.press("Enter")
        page.wait_for_selector("#pair:not([hidden])", timeout=WAIT_MS)
        page.wait_for_selector("#estimate tbody tr", timeout=WAIT_MS)
        assert page.evaluate("localStorage.getItem('retbench.labeller')") == "ann"
        pairs = _llm(study)

        # the document as text: hostile markup shown literally, never run; query terms marked
        first = pairs[shown(page)]
        assert page.evaluate("document.getElementById('doc').textContent") == first["doc_text"]
        assert page.locator("#doc img, #doc script").count() == 0 and page.title() != "owned"
        marks = page.locator("#doc mark").all_inner_texts()
        stem = Stemmer.Stemmer("english").stemWord
        query_stems = {stem(w) for w in re.findall(r"\w\w+", first["query"].lower())}
        assert marks and all(stem(m.lower()) in query_stems for m in marks)

        # before answering, nothing on the page or in any reply gives the LLM's grade away
        assert page.inner_text("#reveal") == ""
        assert replies and not any('"llm"' in r.text() for r in replies)
        assert page.eval_on_selector("#progress", "p => p.value") == 0
        n_human = page.inner_text("#estimate tbody tr[data-system='bm25'] .n-human")

        press_and_wait_new_pair(page, "2")
        llm = first["llm"]["grade"]
        assert page.inner_text("#reveal .llm") == f"LLM: {llm}"
        assert f"Stored pair #{first['pair_id']}: you 2" in page.inner_text("#reveal")
        assert page.eval_on_selector("#progress", "p => p.value") == 1

        skipped = shown(page)
        press_and_wait_new_pair(page, "s")
        assert page.eval_on_selector("#progress", "p => p.value") == 2
        press_and_wait_new_pair(page, "u")  # the skip is taken back: the skipped pair returns
        assert shown(page) == skipped
        press_and_wait_new_pair(page, "Backspace")  # and the grade: the first pair returns
        assert shown(page) == f"{first['doc_id']}|{first['qid']}"
        assert page.eval_on_selector("#progress", "p => p.value") == 0
        assert page.inner_text("#reveal") == ""

        page.keyboard.press("?")
        assert page.is_visible("#help")
        page.keyboard.press("Escape")
        assert not page.is_visible("#help")

        # grade on until a query is complete: the people's grades reach the estimate
        for _ in range(len(pairs)):
            press_and_wait_new_pair(page, "1")
            page.wait_for_function(
                "() => !document.getElementById('estimate').classList.contains('loading')", timeout=WAIT_MS
            )
            if page.inner_text("#estimate tbody tr[data-system='bm25'] .n-human") != n_human:
                break
        assert page.inner_text("#estimate tbody tr[data-system='bm25'] .n-human") != n_human
        events = _events(study)
        assert [e["event"] for e in events[:4]] == ["grade", "skip", "undo", "undo"]
        assert [e["undoes"] for e in events[2:4]] == [1, 0]
        assert all(e["labeller"] == "ann" and e["shown"]["doc_sha256"] for e in events)
        graded = [e["pair_id"] for e in events[4:]]
        assert len(graded) == len(set(graded)) and all(e["event"] == "grade" for e in events[4:])
    finally:
        context.close()
        stop_process(proc, timeout=10)


def test_a_server_killed_mid_session_loses_no_stored_label_and_the_page_resumes(browser, study):
    port = free_port()
    proc, url = start_page(study, port, "--labeller", "bob")
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#pair:not([hidden])", timeout=WAIT_MS)
        assert page.inner_text("#labeller-name") == "bob"
        done = []
        for key in ("3", "0"):
            done.append(shown(page))
            press_and_wait_new_pair(page, key)

        proc.kill()  # SIGKILL: no shutdown of any kind
        proc.wait(timeout=30)
        done.append(shown(page))
        page.keyboard.press("1")  # typed while the server is gone: kept and sent again until it is back
        page.wait_for_selector("#status.offline", timeout=WAIT_MS)

        proc, _ = start_page(study, port, "--labeller", "bob")
        page.wait_for_function(
            "b => document.getElementById('doc-id').textContent + '|' + document.getElementById('qid').textContent !== b"
            " && !document.body.classList.contains('busy')",
            arg=done[-1],
            timeout=WAIT_MS,
        )
        assert page.get_attribute("#status", "class") != "offline"
        assert page.eval_on_selector("#progress", "p => p.value") == 3

        events = _events(study)
        keys = [f"{e['doc_id']}|{e['qid']}" for e in events]
        assert [e["event"] for e in events] == ["grade"] * 3 and keys == done  # each stored once, in order
        assert [e["grade"] for e in events] == [3, 0, 1]

        page.reload()  # a reloaded page resumes after the last stored label
        page.wait_for_selector("#pair:not([hidden])", timeout=WAIT_MS)
        assert shown(page) not in done
        assert page.eval_on_selector("#progress", "p => p.value") == 3
    finally:
        context.close()
        stop_process(proc, timeout=10)
