"""Datasets by name or path, and what `retbench datasets info` reports about them.

A dataset spec is one of: a shipped name (`scifact`), a BEIR folder path, `hf:<name>` for a BEIR
dataset on the Hugging Face hub (BeIR/<name> and BeIR/<name>-qrels; needs network), `irds:<id>` for a
dataset read through ir_datasets (`irds:beir/scifact/test`, never downloaded by retbench), or a golden-set
folder (`corpus.jsonl` in BEIR's corpus format + `golden.yaml`, split `test`; e.g. the shipped `rag`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Dataset
from retbench.errors import InputError
from retbench.io.beir import read_beir
from retbench.io.chunking_eval import read_chunking_eval_dataset
from retbench.io.golden import read_golden_dataset
from retbench.io.hf import load_hf_beir
from retbench.io.irds import PREFIX as IRDS_PREFIX
from retbench.io.irds import load_irds


def corpora_dirs() -> list[Path]:
    """Where shipped corpora live: $RETBENCH_CORPORA, the source checkout, then the installed wheel."""
    dirs = []
    if os.environ.get("RETBENCH_CORPORA"):
        dirs.append(Path(os.environ["RETBENCH_CORPORA"]))
    here = Path(__file__).resolve().parent.parent
    dirs += [here.parent.parent / "corpora", here / "corpora"]
    return [d for d in dirs if d.is_dir()]


def shipped() -> dict[str, Path]:
    """Shipped dataset names and their folders."""
    out: dict[str, Path] = {}
    for root in corpora_dirs():
        for sub in sorted(root.iterdir()):
            if sub.is_dir() and sub.name not in out and not sub.name.startswith("."):
                out[sub.name] = sub
    return out


def resolve(spec: str | Path) -> Path:
    """The folder a dataset spec names; a path wins over a shipped name."""
    p = Path(spec)
    if p.exists():
        return p
    names = shipped()
    if str(spec) in names:
        return names[str(spec)]
    raise InputError(
        f"no dataset folder or shipped dataset named {str(spec)!r} (shipped: {', '.join(names) or 'none'})",
        field="dataset",
    )


def load_dataset(
    spec: str | Path, splits: list[str] | None = None, *, strict: bool = False, join_rule: str = "title_space_text"
) -> Dataset:
    """Load a dataset from a shipped name, a BEIR folder, a chunking set folder, `hf:<name>` or `irds:<id>`."""
    if isinstance(spec, str) and spec.startswith("hf:"):
        return load_hf_beir(spec[3:], splits=splits, join_rule=join_rule)
    if isinstance(spec, str) and spec.startswith(IRDS_PREFIX):
        return load_irds(spec[len(IRDS_PREFIX) :], splits, strict=strict, join_rule=join_rule)
    folder = resolve(spec)
    if (folder / "questions.jsonl").is_file() and (folder / "corpora").is_dir():
        return read_chunking_eval_dataset(folder)
    if (folder / "golden.yaml").is_file() and (folder / "corpus.jsonl").is_file():
        return read_golden_dataset(folder, join_rule=join_rule, name=folder.name)

    name = folder.name if Path(spec).exists() else str(spec)
    return read_beir(folder, splits, strict=strict, join_rule=join_rule, name=name)


def _length_stats(lengths: np.ndarray) -> dict[str, float]:
    if len(lengths) == 0:
        return {}
    return {
        "min": int(lengths.min()),
        "mean": round(float(lengths.mean()), 1),
        "median": float(np.median(lengths)),
        "p95": float(np.percentile(lengths, 95)),
        "max": int(lengths.max()),
    }


def empty_queries(queries: Mapping[str, str], ids: Iterable[str] | None = None) -> list[str]:
    """Ids (of `ids`, default all) of the queries whose text is empty or only whitespace: a retriever given one
    answers nothing or anything, so a run refuses them and `datasets info` reports them."""
    return [q for q in (queries if ids is None else ids) if not queries[q].strip()]


def dataset_info(ds: Dataset) -> dict[str, Any]:
    """Counts, grade histograms, length statistics and the problems loading found."""
    corpus = ds.corpus
    words = np.fromiter((len(corpus.joined(i).split()) for i in range(len(corpus))), dtype=np.int64, count=len(corpus))
    chars = np.fromiter((len(corpus.joined(i)) for i in range(len(corpus))), dtype=np.int64, count=len(corpus))
    empty = int((chars == 0).sum())
    splits = {}
    for split, qrels in ds.qrels.items():
        judged = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
        splits[split] = {
            "queries": len(qrels),
            "queries_with_relevant": len(judged),
            "judgements": qrels.n_judgements,
            "grades": {str(g): n for g, n in qrels.grade_histogram().items()},
            "relevant_per_query": round(sum(len(qrels.relevant(q)) for q in qrels) / max(len(qrels), 1), 2),
        }
    problems = list(ds.problems)
    for split, s in splits.items():
        if not s["queries_with_relevant"]:
            what = "has no judged query" if not s["queries"] else "judges no document relevant"
            problems.append(f"split {split!r} {what}: it cannot be evaluated (retbench run refuses it)")
    if empty:
        problems.append(f"{empty} document(s) have no text")
    blank = empty_queries(ds.queries)
    if blank:
        first = ", ".join(blank[:5]) + (", ..." if len(blank) > 5 else "")
        problems.append(f"{len(blank)} query/queries have no text (first: {first}): retbench run refuses them")
    return {
        "name": ds.name,
        "path": ds.path,
        "documents": len(corpus),
        "queries": len(ds.queries),
        "join_rule": corpus.join_rule,
        "document_words": _length_stats(words),
        "document_chars": _length_stats(chars),
        "splits": splits,
        "problems": problems,
    }
