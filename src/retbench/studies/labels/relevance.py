"""LLM relevance labels for the holes in human qrels (the UMBRELA recipe).

Pool the top `depth` documents of every given system per query, drop the (query, document) pairs
the human qrels already judge, and ask the judge to grade each remaining pair 0-3 with a versioned
prompt (the rubric follows UMBRELA: Upadhyay et al. 2024, "UMBRELA: UMbrela is the (Open-Source
Reproduction of the) Bing RELevance Assessor", which reproduces Thomas et al.'s Bing prompt).
The grades are written as their own TREC qrels file with a provenance file beside it, never merged
into the human qrels on disk; evaluation chooses `human`, `llm` or `human+llm` (human first, LLM
labels only where no human label exists) and says which.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retbench.data.corpus import Corpus
from retbench.data.qrels import Qrels
from retbench.data.run import Run
from retbench.errors import InputError
from retbench.io.files import write_json, write_text
from retbench.io.judgements import PROVENANCE_FILE
from retbench.llm.judge import Judge
from retbench.secrets import redact

QRELS_FILE = "llm_qrels.txt"
CALLS_FILE = "judge_calls.jsonl"


def pool(runs: Sequence[Run], depth: int, query_ids: Sequence[str] | None = None) -> dict[str, list[str]]:
    """Per query, the union of every run's top `depth` doc ids (first appearance order)."""
    out: dict[str, list[str]] = {}
    qids = list(query_ids) if query_ids is not None else sorted({q for r in runs for q in r})
    for qid in qids:
        seen: dict[str, None] = {}
        for run in runs:
            if qid in run:
                for doc in run.docs(qid)[:depth]:
                    seen.setdefault(str(doc), None)
        if seen:
            out[qid] = list(seen)
    return out


def unjudged_pairs(
    pooled: Mapping[str, Sequence[str]], human: Qrels | Mapping[str, Mapping[str, int]]
) -> list[tuple[str, str]]:
    """Pooled pairs with no human label of any grade."""
    return [(q, d) for q, docs in pooled.items() for d in docs if d not in (human.get(q) or {})]


@dataclass
class RelevanceLabels:
    """What judge-relevance produced: the LLM qrels, every verdict's status, and the provenance written."""

    qrels: Qrels
    pairs: list[tuple[str, str]]
    statuses: dict[str, int]
    provenance: dict[str, Any]
    out: Path


def passage_text(corpus: Corpus, doc_id: str, max_chars: int) -> str:
    text = corpus.joined(corpus.index[doc_id])
    return text if len(text) <= max_chars else text[:max_chars].rsplit(" ", 1)[0] + " ..."


def judge_items(
    pairs: Sequence[tuple[str, str]], queries: Mapping[str, str], corpus: Corpus, max_chars: int
) -> list[tuple[list[str], dict[str, str]]]:
    """(key, prompt fields) for each pair; a doc id missing from the corpus is an input error."""
    items = []
    for q, d in pairs:
        if d not in corpus:
            raise InputError(f"document {d!r} (query {q!r}) is not in the corpus", field="doc_id")
        items.append(([q, d], {"query": queries[q], "passage": passage_text(corpus, d, max_chars)}))
    return items


def label_pairs(
    judge: Judge,
    pairs: Sequence[tuple[str, str]],
    queries: Mapping[str, str],
    corpus: Corpus,
    out: Path,
    *,
    max_chars: int = 2000,
    context: Mapping[str, object] | None = None,
) -> RelevanceLabels:
    """Judge every pair, write `llm_qrels.txt` (only ok verdicts) and its provenance; failures are counted."""
    verdicts = judge.judge(judge_items(pairs, queries, corpus, max_chars))
    grades: dict[str, dict[str, int]] = {}
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
        if v.ok:
            grades.setdefault(v.key[0], {})[v.key[1]] = int(v.value)
    out.mkdir(parents=True, exist_ok=True)
    text = redact("".join(f"{q} 0 {d} {g}\n" for q, docs in grades.items() for d, g in docs.items()))
    write_text(out / QRELS_FILE, text)
    provenance = {
        "labels": "llm",
        "file": QRELS_FILE,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "grades": "0-3 (0 nothing to do with the query, 1 on topic, 2 partial answer, 3 exact answer)",
        "pairs": len(pairs),
        "judged": statuses.get("ok", 0),
        "statuses": statuses,
        "judge": judge.manifest(),
        "calls_log": CALLS_FILE,
        "max_passage_chars": max_chars,
        **dict(context or {}),
    }
    write_json(out / PROVENANCE_FILE, provenance, ensure_ascii=False)
    return RelevanceLabels(Qrels(grades), list(pairs), statuses, provenance, out)


def find_runs(paths: Sequence[str | Path]) -> tuple[list[Run], Path | None]:
    """Runs from results directories (`systems/<name>/run.trec`) and run files; the first results dir found."""
    from retbench.io.trec import read_run

    runs: list[Run] = []
    results_dir = None
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("systems/*/run.trec")) + sorted(p.glob("*/systems/*/run.trec"))
            if not found:
                raise InputError("no systems/<name>/run.trec under this folder", path=p)
            results_dir = results_dir or p
            runs += [read_run(f, name=f.parent.name) for f in found]
        else:
            runs.append(read_run(p, name=p.stem))
    if not runs:
        raise InputError("give a results directory or at least one run file", field="RUNS")
    return runs, results_dir


def dataset_of(results_dir: Path | None) -> tuple[str | None, str | None]:
    """(dataset, split) recorded in a results directory's manifest, if any."""
    if results_dir is None or not (results_dir / "manifest.json").is_file():
        return None, None
    manifest = json.loads((results_dir / "manifest.json").read_text())
    data = (manifest.get("datasets") or [{}])[0]
    return data.get("path") or data.get("name"), data.get("split")
