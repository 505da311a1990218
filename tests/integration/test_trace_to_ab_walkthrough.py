"""The walk-through at the top of docs/howto/label-study.md, end to end, each command exactly as the page writes it.

1. The shipped LangChain BM25 retriever, instrumented with OpenInference, serves 24 SciFact test claims over a
   300-document slice (their judged documents and others; titles only, so the tiny judge below reads short
   passages); the OpenTelemetry in-memory exporter's spans are written as OTLP JSON (`spans.json`), what the
   OTLP exporter sends.
2. `retbench traces import`, `label init` (the live run against a BM25 config with other parameters, the
   `systems.yaml` of the page), `label prelabel` with a real judge (`transformers serve` with Qwen2.5-Coder-0.5B on
   127.0.0.1, the judge tests' server), all as CLI subprocesses.
3. `retbench label serve` and a person in real Chromium, keyboard only, grading the first queued queries with
   the grades SciFact's annotators gave (someone who knows the answers).
4. `retbench compare --labels` prints the PPI answer line with `estimate_study`'s numbers and as many human
   labels as pairs were graded; `retbench gate --labels` exits as the page's `criteria.yaml` says it must.

The page's `judge.yaml` names a judge server; here the judge file names the loopback judge server and a short
prompt instead, the one difference from the page (which the docs say).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from browser import CHROMIUM
from label_page import WAIT_MS, WALK, press_and_wait_new_pair, shown, start_page
from repo_paths import PROMPTS, ROOT, SRC
from retbench.loopback import stop_process

pytest.importorskip("langchain_community", reason="the frameworks extra is not installed")
pytest.importorskip("openinference.instrumentation.langchain", reason="the traces extra is not installed")
sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian's 'chromium')"),
]

PAGE = ROOT / "docs" / "howto" / "label-study.md"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
TRACED_QUERIES, SLICE_DOCS, LABELLED_QUERIES = 24, 300, 2
ANSWER = re.compile(
    r"^(?:(?P<winner>\S+) beats (?P<loser>\S+) by (?P<by>[\d.]+) \[(?P<lo>[-\d.]+), (?P<hi>[-\d.]+)\] nDCG@2"
    r"|no clear winner: (?P<b>\S+) − (?P<a>\S+) = (?P<mean>[-\d.]+) \[(?P<nlo>[-\d.]+), (?P<nhi>[-\d.]+)\] nDCG@2, "
    r"the interval holds 0) \(PPI, (?P<human>\d+) human / (?P<llm>\d+) LLM labels, judged@2 (?P<judged>[\d.]+)\)$"
)


def _page() -> tuple[list[str], dict[str, str]]:
    """The page's shell command lines and the walk-through's YAML files (the first block whose first line is
    `# NAME.yaml ...`; later sections show other examples of the same files)."""
    text = PAGE.read_text(encoding="utf-8")
    lines, files = [], {}
    for kind, body in FENCE.findall(text):
        if kind == "bash":
            lines += [line.split(" #", 1)[0].strip() for line in body.splitlines()]
        elif kind == "yaml" and (m := re.match(r"# (\S+\.yaml)", body)):
            files.setdefault(m.group(1), body)
    return lines, files


def _retbench(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A docs line run as the user types it (the `retbench` of this checkout's sources)."""
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "retbench.cli", *shlex.split(line)[1:]]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3000, check=False)


def _trace_the_live_retriever(scifact: Any, out: Path) -> tuple[dict[str, str], Any]:
    """Serve SciFact claims with the instrumented LangChain BM25 retriever and write its spans as OTLP JSON.

    Returns the claims' texts -> SciFact query ids, and the run the retriever served."""
    from google.protobuf.json_format import MessageToJson
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from retbench.data import Corpus
    from retbench.retrievers import create

    qrels = scifact.split("test")
    qids = list(qrels)[:TRACED_QUERIES]
    judged = sorted({d for q in qids for d in qrels[q]})
    others = [d for d in scifact.corpus.ids if d not in set(judged)][: SLICE_DOCS - len(judged)]
    ids = judged + others
    corpus = Corpus(ids, [scifact.corpus[d].title for d in ids], None, None)
    queries = scifact.queries.subset(qids)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        live = create("langchain", {"factory": "retbench.retrievers.frameworks.langchain_examples:bm25"})
        live.index(corpus)
        run = live.search(queries, 10)
    finally:
        instrumentor.uninstrument()
    (out / "spans.json").write_text(MessageToJson(encode_spans(exporter.get_finished_spans())))
    return {queries[q]: q for q in qids}, run


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def _grade_in_the_browser(browser: Any, work: Path, line: str, grade_of: dict[tuple[str, str], int]) -> list[str]:
    """Open the page as `line` starts it and grade the first queued queries by keyboard; the pairs graded."""
    args = shlex.split(line)[3:]  # after `retbench label serve`
    proc, url = start_page(work / args[0], 0, *args[1:])
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#pair:not([hidden])", timeout=WAIT_MS)
        assert page.inner_text("#labeller-name") == "ann"
        pairs = [json.loads(x) for x in (work / "study" / "pairs.jsonl").read_text().splitlines()]
        queued = sorted((p for p in pairs if p["order"] is not None), key=lambda p: p["order"])
        queue = [f"{p['doc_id']}|{p['qid']}" for p in queued]
        first = list(dict.fromkeys(key.split("|")[1] for key in queue))[:LABELLED_QUERIES]
        todo = [key for key in queue if key.split("|")[1] in first]
        assert queue[: len(todo)] == todo  # a query's pairs come together in the queue
        for key in todo:
            assert shown(page) == key  # the page follows the study's queue
            doc_id, qid = key.split("|")
            press_and_wait_new_pair(page, str(grade_of[(qid, doc_id)]))
        return todo
    finally:
        context.close()
        stop_process(proc, timeout=10)


def test_from_a_trace_file_to_the_ab_answer_as_the_docs_walk_through_it(
    served, scifact, browser, tmp_path, monkeypatch
):
    url, model = served
    lines, files = _page()
    for line in WALK:
        assert line in lines, f"not in {PAGE.name} any more: {line}"
    work = tmp_path / "work"
    work.mkdir()
    for name in ("systems.yaml", "criteria.yaml"):
        (work / name).write_text(files[name])
    (work / "judge.yaml").write_text(
        yaml.safe_dump(
            {
                "judge": {
                    "base_url": url,
                    "model_file": str(model),
                    "max_tokens": 8,
                    "prompt": str(PROMPTS / "tiny_relevance_v1.txt"),
                    "timeout": 3000,
                    "retries": 0,
                }
            }
        )
    )
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))  # the subprocesses' judge cache: this test's own
    claim_of, served_run = _trace_the_live_retriever(scifact, work)

    imported = _retbench(WALK[0], work)
    assert imported.returncode == 0, imported.stderr
    assert f"{TRACED_QUERIES} spans: {TRACED_QUERIES} retriever, 0 malformed" in imported.stdout
    init = _retbench(WALK[1], work)
    assert init.returncode == 0, init.stderr
    assert "2 systems (live-langchain, bm25), 3 queries" in init.stdout

    # the study pools exactly what the live retriever served for the sampled claims
    texts = {json.loads(x)["qid"]: json.loads(x)["text"] for x in (work / "study" / "queries.jsonl").open()}
    study_pairs = [json.loads(x) for x in (work / "study" / "pairs.jsonl").read_text().splitlines()]
    for qid, text in texts.items():
        top = [d for d, _ in served_run.ranking(claim_of[text])][:2]
        live = sorted(
            (p["pooled_by"]["live-langchain"], p["doc_id"])
            for p in study_pairs
            if p["qid"] == qid and "live-langchain" in p["pooled_by"]
        )
        assert [d for _, d in live] == top

    prelabel = _retbench(WALK[2], work)
    assert prelabel.returncode in (0, 3), prelabel.stderr  # 3: a verdict failed, which the pair records
    assert f"judge plan: {len(study_pairs)} verdicts, 0 cached" in prelabel.stdout

    qrels = scifact.split("test")
    grade_of = {(p["qid"], p["doc_id"]): qrels[claim_of[texts[p["qid"]]]].get(p["doc_id"], 0) for p in study_pairs}
    graded = _grade_in_the_browser(browser, work, WALK[3], grade_of)
    events = [json.loads(x) for x in (work / "study" / "labels.jsonl").read_text().splitlines()]
    assert [f"{e['doc_id']}|{e['qid']}" for e in events] == graded
    assert all(e["event"] == "grade" and e["labeller"] == "ann" for e in events)
    assert [e["grade"] for e in events] == [grade_of[(e["qid"], e["doc_id"])] for e in events]

    from retbench.studies.labels.answer import estimate_study

    answer = estimate_study(work / "study")
    diff = answer["difference"]
    assert diff["estimate"] == "PPI" and diff["n_human"] == len(graded)
    assert not math.isnan(diff["low"]) and not math.isnan(diff["high"])

    compared = _retbench(WALK[4], work)
    assert compared.returncode == 0, compared.stderr
    said = ANSWER.match(compared.stdout.splitlines()[0])
    assert said, compared.stdout
    assert int(said["human"]) == len(graded) and int(said["llm"]) == diff["n_llm"]
    judged = min(answer["systems"][s]["judged"] for s in ("live-langchain", "bm25"))
    assert said["judged"] == f"{judged:.2f}"
    if said["winner"]:  # "B beats A by d [lo, hi]" when the interval excludes 0, in the winner's direction
        sign = 1 if said["winner"] == "bm25" else -1
        lo, hi = sorted((sign * diff["low"], sign * diff["high"]))
        assert (said["by"], said["lo"], said["hi"]) == (f"{sign * diff['mean']:.4f}", f"{lo:.4f}", f"{hi:.4f}")
        assert lo > 0
    else:
        assert (said["b"], said["a"]) == ("bm25", "live-langchain")
        assert (said["mean"], said["nlo"], said["nhi"]) == tuple(f"{diff[x]:.4f}" for x in ("mean", "low", "high"))
        assert diff["low"] <= 0 <= diff["high"]

    # criteria.yaml: no drop of B − A allowed, unless its interval holds 0
    gated = _retbench(WALK[5], work)
    assert gated.returncode == (1 if diff["high"] < 0 else 0), gated.stdout + gated.stderr
    assert f"PPI, {len(graded)} human / {diff['n_llm']} LLM labels" in gated.stdout + gated.stderr
