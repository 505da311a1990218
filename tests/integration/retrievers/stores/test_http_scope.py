"""An http service that chooses a scope itself and says which in its answer (`scope`): the choice is recorded per
query as a scope selector's is, and scope_miss_rate audits it. The service is a real server on loopback that
searches with real BM25 inside the folder it picks."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from http_support import send_json, serving_in_thread
from retbench.data import Corpus, Queries, QueryStatus
from retbench.retrievers.base import create
from retbench.studies.benchmark import load_config, run_experiment
from stored import flat

DOCS = {  # doc id -> (rel_path, text)
    "n1": ("notes/cats.md", "cats purr and sleep in the sun"),
    "n2": ("notes/dogs.md", "dogs bark and fetch the ball"),
    "p1": ("papers/fusion.md", "reciprocal rank fusion merges rankings"),
    "p2": ("papers/bm25.md", "bm25 saturates term frequency"),
}
# query id -> (text, gold); the service scopes a question naming a paper word to papers/, any other to notes/
QUERIES = {
    "q1": ("why do cats purr", "n1"),  # notes, gold in notes: inside
    "q2": ("reciprocal rank fusion", "p1"),  # papers, gold in papers: inside
    "q3": ("do dogs know bm25", "n2"),  # papers, gold in notes: miss
    "q4": ("dogs fetch the ball", "n2"),  # notes, gold in notes: inside
}
PAPER_WORDS = {"fusion", "bm25", "rankings"}


class _Scoping(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        query, k = body["query"], int(body["k"])
        folder = "papers" if PAPER_WORDS & set(query.split()) else "notes"
        with self.server.lock:  # type: ignore[attr-defined]
            ranking = self.server.bm25.search_one(query, len(DOCS))  # type: ignore[attr-defined]
        inside = [{"id": d, "score": s} for d, s in ranking if DOCS[d][0].startswith(folder + "/")][:k]
        scope = {"/filter": {"folder": folder}, "/folder": folder, "/bad": 5}.get(self.path)
        send_json(self, {"retrieved": inside, **({"scope": scope} if self.path != "/plain" else {})})


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    bm25 = create("bm25s", {})
    bm25.index(Corpus(list(DOCS), [t for _, t in DOCS.values()]))
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Scoping)
    srv.daemon_threads = True
    srv.bm25, srv.lock = bm25, threading.Lock()  # type: ignore[attr-defined]
    with serving_in_thread(srv):
        yield f"http://127.0.0.1:{srv.server_address[1]}"


def write_set(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    with open(root / "corpus.jsonl", "w") as fh:
        for d, (rel, text) in DOCS.items():
            fh.write(json.dumps({"_id": d, "text": text, "metadata": {"rel_path": rel}}) + "\n")
    with open(root / "queries.jsonl", "w") as fh:
        for q, (text, _) in QUERIES.items():
            fh.write(json.dumps({"_id": q, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{gold}\t1" for q, (_, gold) in QUERIES.items()]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_the_scope_an_http_service_reports_is_recorded_and_scored_against_the_hand_count(
    tmp_path: Path, service: str
) -> None:
    systems = [
        {"name": route.strip("/"), "adapter": "http", "params": {"url": service + route}}
        for route in ("/filter", "/folder", "/plain")
    ]
    cfg = {
        "name": "svc",
        "output": str(tmp_path / "out"),
        "depth": 2,
        "metrics": ["scope_miss_rate", "recall@2"],
        "datasets": [{"name": str(write_set(tmp_path / "set")), "split": "test"}],
        "systems": systems,
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    run_experiment(load_config(tmp_path / "cfg.yaml"), log=lambda _: None, history=False)
    values = flat(tmp_path / "out")
    assert values["filter"]["scope_miss_rate"] == values["folder"]["scope_miss_rate"] == 1 / 4  # q3
    assert values["plain"]["scope_miss_rate"] is None  # the service reported no scope: no scope stage
    status = {
        r["qid"]: r for r in map(json.loads, (tmp_path / "out/systems/folder/status.jsonl").read_text().splitlines())
    }
    # in papers/ only bm25.md shares a word with the question: one document served
    assert status["q3"]["scope"] == {"scope": {"folder": "papers"}, "scoped_n": 1, "fallback": False}
    journal = (tmp_path / "out/systems/filter/journal.jsonl").read_text().splitlines()
    assert {r["qid"]: r["scope"]["scope"] for r in map(json.loads, journal) if "scope" in r}["q1"] == {
        "folder": "notes"
    }
    assert "seconds" not in status["q1"]["scope"]  # the service did not say how long choosing took
    assert "scope" not in values["folder"]["latency"]["stages"]  # never a made-up 0 ms stage


def test_a_malformed_scope_makes_the_query_invalid_naming_the_field(service: str) -> None:
    http = create("http", {"url": service + "/bad"}, name="bad")
    try:
        run = http.search(Queries({"q": "cats purr"}), 2)
    finally:
        http.close()
    assert run.status["q"] == QueryStatus.INVALID
    assert "scope: expected a filter mapping, a folder or null, got 5" in run.errors["q"]
    assert http.scopes == {}
