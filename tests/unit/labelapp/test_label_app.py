"""The labelling page's routes, in process (Starlette's TestClient): what a person is shown, what is stored,
and what a cross-site page cannot do."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")  # TestClient's transport

from starlette.testclient import TestClient

from label_study_data import write_study
from retbench.errors import InputError
from retbench.labelapp.app import create_app
from retbench.studies.labels.log import doc_sha256

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def study(tmp_path):
    return write_study(tmp_path / "study")


@pytest.fixture
def client(study):
    return TestClient(create_app(study), base_url=BASE)


def _pairs(study) -> list[dict]:
    return [json.loads(line) for line in (study / "pairs.jsonl").read_text().splitlines()]


def _events(study) -> list[dict]:
    path = study / "labels.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _next(client, who="ann", **params) -> dict:
    r = client.get("/api/next", params={"labeller": who, **params})
    assert r.status_code == 200, r.text
    return r.json()


def _grade(client, pair, grade, who="ann"):
    body = {"labeller": who, "pair_id": pair["pair_id"], "grade": grade, "doc_sha256": pair["doc_sha256"]}
    return client.post("/api/label", json=body)


def _keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | set().union(*map(_keys, obj.values()))
    if isinstance(obj, list):
        return set().union(*map(_keys, obj)) if obj else set()
    return set()


def test_the_next_pair_never_carries_the_llm_grade(client, study):
    shown = _next(client)
    assert shown["pair"] is not None
    assert not {"llm", "probs", "pooled_by"} & _keys(shown)


def test_the_document_comes_as_segments_that_rejoin_to_its_text_with_the_query_terms_marked(client, study):
    pair = _next(client)["pair"]
    text = _pairs(study)[pair["pair_id"]]["doc_text"]
    assert "".join(s["text"] for s in pair["segments"]) == text
    marked = {s["text"].lower() for s in pair["segments"] if s["mark"]}
    assert marked, "a pooled BM25 document shares a term with its query"
    assert "the" not in pair["terms"] and "the" not in marked  # stopwords are not marked
    assert pair["doc_sha256"] == doc_sha256(text)


def test_a_grade_is_stored_with_what_was_shown_and_then_reveals_the_llm_grade(client, study):
    pair = _next(client)["pair"]
    r = _grade(client, pair, 2)
    assert r.status_code == 200, r.text
    truth = _pairs(study)[pair["pair_id"]]["llm"]
    assert r.json()["reveal"] == {
        "pair_id": pair["pair_id"],
        "grade": 2,
        "llm": {"grade": truth["grade"], "status": "ok"},
    }
    (event,) = _events(study)
    assert (event["event"], event["pair_id"], event["grade"], event["labeller"]) == ("grade", pair["pair_id"], 2, "ann")
    assert event["shown"] == {"query": pair["query"], "doc_sha256": pair["doc_sha256"], "llm_hidden": True,
                              "highlight": pair["terms"]}  # fmt: skip
    assert _next(client)["pair"]["pair_id"] != pair["pair_id"]


def test_grades_outside_the_scale_unknown_pairs_and_changed_documents_are_refused(client, study):
    pair = _next(client)["pair"]
    assert _grade(client, pair, 4).status_code == 400
    assert _grade(client, pair, True).status_code == 400
    assert _grade(client, {**pair, "pair_id": 999}, 1).status_code == 400
    stale = _grade(client, {**pair, "doc_sha256": "0" * 64}, 1)
    assert stale.status_code == 409 and "changed since it was shown" in stale.json()["error"]
    assert _events(study) == []


def test_a_repeated_grade_is_stored_once(client, study):
    pair = _next(client)["pair"]
    assert _grade(client, pair, 1).json()["duplicate"] is False
    again = _grade(client, pair, 1).json()
    assert again["duplicate"] is True and again["stored"] == 0
    assert len(_events(study)) == 1
    assert _grade(client, pair, 3).status_code == 409


def test_skip_then_undo_brings_the_pair_back(client, study):
    pair = _next(client)["pair"]
    body = {"labeller": "ann", "pair_id": pair["pair_id"], "doc_sha256": pair["doc_sha256"]}
    skipped = client.post("/api/skip", json=body).json()
    assert "reveal" not in skipped  # a skip is no answer: nothing is revealed
    assert _next(client)["pair"]["pair_id"] != pair["pair_id"]
    undone = client.post("/api/undo", json={"labeller": "ann"}).json()
    assert undone["undone"]["event"] == "skip" and undone["pair"]["pair_id"] == pair["pair_id"]
    assert "llm" not in _keys(undone["pair"])
    assert _next(client)["pair"]["pair_id"] == pair["pair_id"]
    assert [e["event"] for e in _events(study)] == ["skip", "undo"]
    assert client.post("/api/undo", json={"labeller": "ann"}).status_code == 409


def test_a_regrade_after_an_undo_records_that_the_llm_grade_had_been_seen(client, study):
    pair = _next(client)["pair"]
    _grade(client, pair, 0)
    client.post("/api/undo", json={"labeller": "ann"})
    assert _grade(client, pair, 1).status_code == 200
    assert [e["shown"]["llm_hidden"] for e in _events(study)] == [True, True, False]


def test_progress_counts_what_this_labeller_did_in_the_queue(client, study):
    before = _next(client)["progress"]
    assert (before["done"], before["queued"], before["pairs"]) == (0, 15, 15)
    pair = _next(client)["pair"]
    after = _grade(client, pair, 2).json()["progress"]
    assert (after["done"], after["graded_by_you"], after["pairs_graded"]) == (1, 1, 1)


def test_a_second_labeller_in_agreement_mode_gets_the_pairs_others_graded_and_kappa_is_reported(client, study):
    graded = []
    for grade in (3, 0):
        pair = _next(client)["pair"]
        _grade(client, pair, grade)
        graded.append(pair["pair_id"])
    for grade in (3, 1):
        pair = _next(client, "bob", mode="agreement")["pair"]
        assert pair["pair_id"] in graded
        _grade(client, pair, grade, who="bob")
    assert _next(client, "bob", mode="agreement")["pair"] is None
    agreement = client.get("/api/estimate").json()["agreement"]
    assert agreement["labellers"] == {"ann": 2, "bob": 2}
    (row,) = agreement["pairs"]
    assert (row["a"], row["b"], row["n"]) == ("ann", "bob", 2)
    # relevant (>= 1): ann 1, 0 and bob 1, 1: p_o = 1/2, p_e = 1/2 * 1 + 1/2 * 0 = 1/2, kappa 0
    assert row["kappa"] == pytest.approx(0.0)


def test_the_estimate_route_returns_the_studys_estimate_per_system(client, study):
    out = client.get("/api/estimate").json()
    systems = out["estimate"]["systems"]
    assert set(systems) == {"bm25", "bm25-nostem"}
    for row in systems.values():
        assert row["low"] <= row["mean"] <= row["high"]


def test_a_new_server_over_the_same_folder_resumes_where_the_labeller_was(study):
    first = TestClient(create_app(study), base_url=BASE)
    done = []
    for grade in (1, 2):
        pair = _next(first)["pair"]
        _grade(first, pair, grade)
        done.append(pair["pair_id"])
    second = TestClient(create_app(study), base_url=BASE)
    assert _next(second)["pair"]["pair_id"] not in done
    assert _next(second)["progress"]["done"] == 2


def test_cross_site_posts_and_foreign_host_names_are_refused(client, study):
    pair = _next(client)["pair"]
    body = {"labeller": "ann", "pair_id": pair["pair_id"], "grade": 1, "doc_sha256": pair["doc_sha256"]}
    form = client.post("/api/label", data={"labeller": "ann"})  # what a form on another site can send
    assert form.status_code == 403
    other = client.post("/api/label", json=body, headers={"Origin": "http://evil.example"})
    assert other.status_code == 403
    assert client.post("/api/label", json=body, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.post("/api/label", json=body, headers={"Host": "evil.example"}).status_code == 400  # DNS rebinding
    assert _events(study) == []
    assert client.post("/api/label", json=body, headers={"Origin": BASE}).status_code == 200


def test_every_reply_forbids_inline_and_external_code(client):
    page = client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert client.get("/static/app.js").headers["content-security-policy"] == csp
    assert "http" not in page.text.replace("http-equiv", "")  # no external asset is linked


def test_a_labeller_name_is_required(client):
    assert client.get("/api/next").status_code == 400
    assert client.get("/api/next", params={"labeller": "  "}).status_code == 400


def test_a_pairs_file_rewritten_under_the_page_is_read_again_and_a_grade_of_changed_text_refused(client, study):
    pair = _next(client)["pair"]
    pairs = _pairs(study)
    pairs[pair["pair_id"]]["doc_text"] = "a different passage"
    tmp = study / "pairs.jsonl.tmp"
    tmp.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    tmp.replace(study / "pairs.jsonl")  # as the study rewrites it: a new file renamed over the old
    refused = _grade(client, pair, 2)
    assert refused.status_code == 409 and _events(study) == []
    again = client.post("/api/undo", json={"labeller": "ann"})
    assert again.status_code == 409  # nothing was stored, so nothing to undo
    shown = _next(client)["pair"]
    assert shown["pair_id"] == pair["pair_id"] and shown["doc_sha256"] == doc_sha256("a different passage")
    assert _grade(client, shown, 2).status_code == 200


def test_a_folder_that_is_no_study_is_refused_naming_the_file(tmp_path):
    with pytest.raises(InputError, match=r"study\.json"):
        create_app(tmp_path)
