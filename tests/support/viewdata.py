"""Results directories with many systems and many metrics, for the tests of how the views scale.

One real BM25 run over a SciFact slice (100 test queries, the whole corpus) is the seed. Each further
system is that run with its scores perturbed by seeded Gaussian noise (a larger sigma for later systems,
so the systems really differ), re-ranked and written as a TREC run file. The experiment runner then
evaluates every run file as a `runfile` system with twenty metrics, so metrics.json, aggregates and
per-query tables are exactly what users get, and `build_report` reads them through the real code path.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

import abdata

METRICS20 = [
    "ndcg@1",
    "ndcg@3",
    "ndcg@5",
    "ndcg@10",
    "ndcg@20",
    "ndcg@100",
    "recall@1",
    "recall@3",
    "recall@5",
    "recall@10",
    "recall@20",
    "recall@100",
    "P@1",
    "P@5",
    "P@10",
    "mrr@10",
    "map@100",
    "hit@1",
    "hit@10",
    "rprec",
]

# names in the style of configs/stores.yaml and configs/frameworks.yaml: long, sharing long prefixes
_STEMS = [
    "langchain-inmemory-minilm",
    "llamaindex-vectorindex-minilm",
    "pgvector-hnsw-m16-ef64",
    "pgvector-ivfflat-lists100",
    "lancedb-ivfpq-partitions64",
    "milvus-hnsw-m16-ef128",
    "typesense-hybrid-alpha05",
    "qdrant-hnsw-local-exact",
]


def system_names(n: int) -> list[str]:
    """`n` distinct names; the first is the real BM25 run, the others its perturbed variants."""
    names = ["bm25"]
    i = 0
    while len(names) < n:
        names.append(f"{_STEMS[i % len(_STEMS)]}-v{i // len(_STEMS) + 1}")
        i += 1
    return names


@functools.cache
def seed_results(base: Path) -> Path:
    """The real BM25 run the variants derive from (SciFact test split, first 100 queries)."""
    return abdata.make_results(base / "views_seed", {"bm25": abdata.SYSTEMS["bm25"]}, dataset={"max_queries": 100})


def _perturbed(base: Path, i: int) -> Path:
    """Run file of system i: the seed run with scores + N(0, 0.12 i x the score spread), re-ranked, cut to 100."""
    from retbench.data import Run
    from retbench.io.trec import read_run, write_run
    from retbench.results.layout import SystemDir

    path = base / "views_runs" / f"variant{i}.trec"
    if path.is_file():
        return path
    run = read_run(SystemDir.of(seed_results(base), "bm25").run)
    rng = np.random.default_rng(i)
    sigma = 0.12 * i
    perturbed: dict[str, dict[str, float]] = {}
    for qid in run:
        ranking = run.ranking(qid)
        scores = np.array([s for _, s in ranking])
        spread = float(scores.std()) or 1.0
        noisy = scores + rng.normal(0.0, sigma * spread, size=scores.size)
        perturbed[qid] = {d: float(v) for (d, _), v in zip(ranking, noisy, strict=True)}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_run(Run.from_dict(perturbed, name=f"variant{i}"), path)
    return path


@functools.cache
def many_systems(base: Path, n: int) -> Path:
    """A results directory of `n` systems x the twenty METRICS20, written by the real experiment runner."""
    names = system_names(n)
    systems: dict[str, dict] = {names[0]: {"adapter": "runfile", "params": {"path": str(_perturbed(base, 0))}}}
    for i, name in enumerate(names[1:], start=1):
        systems[name] = {"adapter": "runfile", "params": {"path": str(_perturbed(base, i))}}
    import yaml

    from retbench.studies.benchmark import load_config, run_experiment

    out = base / f"views_{n}"
    out.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load(abdata._yaml(out.name, out, systems, 64, {"max_queries": 100}, {}))
    cfg["metrics"] = METRICS20
    cfg_path = out.with_suffix(".yaml")
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run_experiment(load_config(cfg_path), log=lambda _msg: None)
    return out


CHUNKERS = [
    {"name": "fixed_chars_800_o200", "kind": "fixed_chars", "size": 800, "overlap": 200},
    {"name": "fixed_tokens_200", "kind": "fixed_tokens", "size": 200, "overlap": 0},
    {"name": "sentences_5_o1", "kind": "sentences", "size": 5, "overlap": 1},
    {"name": "markdown_250t", "kind": "markdown", "max_size": 250, "unit": "tokens"},
]


@functools.cache
def chunking_study(base: Path) -> Path:
    """The shipped chunking set (40 sampled questions), four chunkers x two BM25 systems, four budgets."""
    import yaml

    from retbench.studies.chunking import load_config, run_chunking

    out = base / "views_chunking"
    cfg = {
        "name": "views-chunking",
        "output": str(out),
        "dataset": str(abdata.ROOT / "corpora" / "chunking_eval"),
        "max_queries": 40,
        "depth": 20,
        "metrics": ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "P@5"],
        "token_k": [5],
        "budgets": [128, 256, 512, 1024],
        "tokenizer": "all-MiniLM-L6-v2",
        "chunkers": CHUNKERS,
        "systems": [
            {"name": "bm25", "adapter": "bm25s", "params": {"stopwords": "en", "stemmer": "english"}},
            {"name": "bm25-nostem", "adapter": "bm25s", "params": {"stopwords": "en", "stemmer": None}},
        ],
    }
    path = base / "views_chunking.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    run_chunking(load_config(path), log=lambda _msg: None)
    return out
