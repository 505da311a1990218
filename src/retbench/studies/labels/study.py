"""A label study folder: pooled (query, document) pairs of the compared systems, pre-labelled by the judge.

`init_study` pools the top k of every system's run over the dataset's queries (`relevance.pool`), keeps each
pair's query and passage text (what the judge and the people read) and writes the folder the study contract
names: `study.json`, `runs/<system>.trec`, `queries.jsonl`, `pairs.jsonl` (one pair a line, `pair_id` = line
index). `prelabel` asks the pinned judge for every pair without an ok verdict (concurrent, cached, logged in
`judge_calls.jsonl`; a failed call is a status on the pair, never a grade). User feedback (a trace import's
`feedback.jsonl`: thumbs, clicks) is copied beside them as its own label source and never read as a human label.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retbench.data.run import Run
from retbench.errors import InputError
from retbench.io.files import iter_jsonl, write_json, write_jsonl
from retbench.llm.judge import Judge
from retbench.metrics.registry import parse_metric
from retbench.studies.labels import relevance as rl

SCHEMA = 1
STUDY_FILE = "study.json"
PAIRS_FILE = "pairs.jsonl"
QUERIES_FILE = "queries.jsonl"
FEEDBACK_FILE = "feedback.jsonl"
SUPPORTED_METRICS = ("ndcg", "P")


@dataclass
class Study:
    """A study folder read back: its settings (study.json) and its pairs in pair_id order."""

    path: Path
    meta: dict[str, Any]
    pairs: list[dict[str, Any]]

    @property
    def systems(self) -> list[str]:
        return list(self.meta["systems"])

    def save_pairs(self) -> None:
        """Rewrite pairs.jsonl atomically (labels never live in it)."""
        write_jsonl(self.path / PAIRS_FILE, self.pairs)


def metric_parts(metric: str, k: int) -> tuple[str, int]:
    """(family, cutoff) of a study metric: nDCG@k or P@k, cut at or above the pool depth is refused."""
    parsed = parse_metric(metric, k)
    family = parsed.metric.name
    cut = int(parsed.k or k)
    if family not in SUPPORTED_METRICS:
        raise InputError(f"a label study scores nDCG@k or P@k (got {metric!r})", field="metric")
    if cut > k:
        raise InputError(
            f"{metric} looks past the pool depth k={k}: its unpooled documents would have no label", field="metric"
        )
    return family, cut


def pool_pairs(runs: Sequence[Run], k: int, qids: Sequence[str]) -> list[dict[str, Any]]:
    """The pooled pairs (`relevance.pool`), each with its 1-based rank in every system that returned it in the top k."""
    pairs: list[dict[str, Any]] = []
    tops = {r.name: r for r in runs}
    for qid, docs in rl.pool(runs, k, qids).items():
        ranked = {
            name: {d: i + 1 for i, d in enumerate(map(str, r.docs(qid)[:k]))} for name, r in tops.items() if qid in r
        }
        for doc in docs:
            ranks = {name: pos[doc] for name, pos in ranked.items() if doc in pos}
            pairs.append({"pair_id": len(pairs), "qid": qid, "doc_id": doc, "pooled_by": ranks})
    return pairs


def init_study(
    study_dir: str | Path,
    dataset: str | Path,
    runs: Sequence[str | Path],
    *,
    k: int = 10,
    metric: str | None = None,
    decision: tuple[str, str] | None = None,
    seed: int = 0,
    split: str | None = None,
    max_chars: int = 2000,
    scale: Sequence[int] = (0, 1, 2, 3),
    note: Callable[[str], None] = print,
    queries: Sequence[str] | None = None,
) -> Study:
    """Create STUDY/ from a dataset (a BEIR folder, qrels optional) and the systems' runs (files, results dirs,
    or experiment configs whose systems are searched over the dataset first: `studies.labels.systems`);
    the metric defaults to nDCG@k. `queries`: pool only these (a migration canary pools the queries whose top k
    changed: elsewhere the two systems' difference is exactly 0 and needs no label)."""
    from retbench.io.datasets import load_dataset

    out = Path(study_dir)
    if (out / STUDY_FILE).exists():
        raise InputError(
            "a study already exists here (it holds people's labels: remove it by hand)", path=out / STUDY_FILE
        )
    if k < 1:
        raise InputError(f"k must be positive (got {k})", field="k")
    metric = metric or f"nDCG@{k}"
    metric_parts(metric, k)
    # deferred: the benchmark machinery (retrievers, executors) only when a config is given, not on every read
    from retbench.studies.labels.systems import with_runs

    runs = with_runs(runs, dataset, out, k, note)
    found, _ = rl.find_runs(runs)
    names = [r.name for r in found]
    if len(set(names)) != len(names):
        raise InputError(f"two systems share a name: {', '.join(names)} (rename a run file)", field="runs")
    if decision is not None and not set(decision) <= set(names):
        raise InputError(
            f"decision {decision[0]},{decision[1]} names a system not among {', '.join(names)}", field="decision"
        )
    ds = load_dataset(dataset, [split] if split else None)
    qids = [q for q in (ds.split(split) if split else ds.queries) if q in ds.queries]
    if queries is not None:
        chosen = set(queries)
        qids = [q for q in qids if q in chosen]
    pairs = pool_pairs(found, k, qids)
    for p in pairs:
        if p["doc_id"] not in ds.corpus:
            raise InputError(f"document {p['doc_id']!r} (query {p['qid']!r}) is not in the corpus", field="doc_id")
        p.update(query=ds.queries[p["qid"]], doc_text=rl.passage_text(ds.corpus, p["doc_id"], max_chars))
        p.update(llm=None, order=None, pi=None)
    pooled = list(dict.fromkeys(p["qid"] for p in pairs))
    if not pairs:
        raise InputError("no pooled pairs: no system returned a document for the dataset's queries", field="runs")
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    for run, src in zip(found, _run_files(runs), strict=True):
        shutil.copyfile(src, out / "runs" / f"{run.name}.trec")
    write_jsonl(out / QUERIES_FILE, [{"qid": q, "text": ds.queries[q]} for q in pooled])
    feedback = Path(str(getattr(ds, "path", "") or dataset)) / FEEDBACK_FILE
    if feedback.is_file():
        shutil.copyfile(feedback, out / FEEDBACK_FILE)
    meta = {
        "schema": SCHEMA,
        "name": out.name,
        "metric": metric,
        "k": k,
        "scale": list(scale),
        "systems": names,
        "decision": {"a": decision[0], "b": decision[1]} if decision else None,
        "seed": seed,
        "dataset": str(getattr(ds, "path", None) or dataset),
        "split": split,
        "judge": None,
        "estimand": "population",
        "max_passage_chars": max_chars,
    }
    write_json(out / STUDY_FILE, meta)
    study = Study(out, meta, pairs)
    study.save_pairs()
    return study


def _run_files(runs: Sequence[str | Path]) -> list[Path]:
    """The run files behind `find_runs`' runs, in the same order."""
    files: list[Path] = []
    for p in map(Path, runs):
        files += (sorted(p.glob("systems/*/run.trec")) + sorted(p.glob("*/systems/*/run.trec"))) if p.is_dir() else [p]
    return files


def read_study(study_dir: str | Path) -> Study:
    """study.json and pairs.jsonl, checked: pair_id must equal the line index."""
    path = Path(study_dir)
    meta_file = path / STUDY_FILE
    if not meta_file.is_file():
        raise InputError("not a label study (no study.json): create one with `retbench label init`", path=path)
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg}", path=meta_file, line=err.lineno) from None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise InputError(f"expected a study.json with schema {SCHEMA}", path=meta_file, field="schema")
    pairs = []
    for i, (lineno, rec) in enumerate(iter_jsonl(path / PAIRS_FILE)):
        if rec.get("pair_id") != i:
            raise InputError(
                f"pair_id {rec.get('pair_id')!r} is not the line index {i}",
                path=path / PAIRS_FILE,
                line=lineno,
                field="pair_id",
            )
        pairs.append(rec)
    return Study(path, meta, pairs)


def prelabel(study_dir: str | Path, judge: Judge, *, dry_run: bool = False) -> tuple[Study, dict[str, Any]]:
    """Ask `judge` for every pair without an ok verdict; store grade, status and grade probabilities per pair.

    Returns the study and the judge's plan (`Judge.estimate`); with `dry_run` nothing is called or written.
    """
    study = read_study(study_dir)
    todo = [p for p in study.pairs if (p.get("llm") or {}).get("status") != "ok"]
    items = [([p["qid"], p["doc_id"]], {"query": p["query"], "passage": p["doc_text"]}) for p in todo]
    plan = judge.estimate(items)
    if dry_run or not items:
        return study, plan
    for p, v in zip(todo, judge.judge(items), strict=True):
        p["llm"] = {"grade": int(v.value) if v.ok else None, "status": v.status, "probs": v.probabilities}
    study.meta["judge"] = judge.manifest()
    write_json(study.path / STUDY_FILE, study.meta)
    study.save_pairs()
    return study, plan


def llm_statuses(study: Study) -> dict[str, int]:
    """Pairs per verdict status ("none": not pre-labelled yet)."""
    out: dict[str, int] = {}
    for p in study.pairs:
        s = (p.get("llm") or {}).get("status") or "none"
        out[s] = out.get(s, 0) + 1
    return out
