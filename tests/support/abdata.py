"""Real A/B material for the compare, gate and report tests: SciFact runs scored by the real engine.

Three BM25 variants (stemmed, unstemmed, and a badly tuned one without stopwords) over the SciFact test split
give per-query metric vectors with the ties, zeros and small effects real comparisons have. The
results directories are written by the real experiment runner, so the CLI reads what users get.
`FlakyBM25` is a backend that fails on some queries, for the exit-3 path.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from repo_paths import ROOT
from retbench.retrievers.base import Ranking
from retbench.retrievers.bm25 import BM25SRetriever

SCIFACT = ROOT / "corpora" / "scifact"
METRICS = ["recall@5", "mrr@10", "ndcg@10", "recall@1", "recall@10", "recall@100"]
SYSTEMS = {
    "bm25": {"adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75, "stopwords": "en", "stemmer": "english"}},
    "bm25_nostem": {"adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75, "stopwords": "en", "stemmer": None}},
    "bm25_weak": {"adapter": "bm25s", "params": {"k1": 0.3, "b": 1.0, "stopwords": None, "stemmer": None}},
}


class FlakyBM25(BM25SRetriever):
    """BM25 whose backend raises on every query text whose length is divisible by `every`."""

    def __init__(self, every: int = 7, **params: object) -> None:
        super().__init__(**params)  # type: ignore[arg-type]
        self.every = every

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        if any(len(t) % self.every == 0 for t in texts):
            raise ConnectionError("backend unavailable (injected by tests/abdata.py)")
        return super().search_batch(texts, k)


def _yaml(name: str, out: Path, systems: dict[str, dict], batch_size: int, dataset: dict, evaluation: dict) -> str:
    import yaml

    ds: dict = {"name": str(SCIFACT), "split": "test", **dataset}
    cfg = {
        "name": name,
        "output": str(out),
        "depth": 100,
        "batch_size": batch_size,
        "metrics": METRICS,
        "datasets": [ds],
        "systems": [{"name": n, **s} for n, s in systems.items()],
    }
    if evaluation:
        cfg["evaluation"] = evaluation
    return yaml.safe_dump(cfg, sort_keys=False)


def make_results(
    out: Path,
    systems: dict[str, dict],
    *,
    batch_size: int = 64,
    dataset: dict | None = None,
    evaluation: dict | None = None,
) -> Path:
    """Run the real experiment runner into `out` and return it (`dataset`: max_queries, corpus_sample...)."""
    from retbench.studies.benchmark import load_config, run_experiment

    out.mkdir(parents=True, exist_ok=True)
    cfg_path = out.with_suffix(".yaml")
    cfg_path.write_text(_yaml(out.name, out, systems, batch_size, dataset or {}, evaluation or {}))
    run_experiment(load_config(cfg_path), log=lambda _msg: None)
    return out


@functools.cache
def scifact_results(base: Path) -> Path:
    """One results directory with the three BM25 systems over all 300 SciFact test queries."""
    return make_results(base / "scifact_ab", SYSTEMS)


@functools.cache
def pytrec_results(base: Path) -> Path:
    """pytrec_eval counting on a slice (100 queries, 1,000 sampled documents): BM25 and a flaky BM25."""
    systems = {"bm25": SYSTEMS["bm25"], "flaky": {"adapter": "abdata:FlakyBM25", "params": {"every": 9}}}
    return make_results(
        base / "pytrec",
        systems,
        batch_size=1,
        dataset={"max_queries": 100, "corpus_sample": 1000},
        evaluation={"mode": "pytrec_eval"},
    )


@functools.cache
def evaluations(base: Path) -> dict:
    """System -> Evaluation, read back from the results directory."""
    from retbench.results import load_results

    res = load_results(scifact_results(base))
    return {s: res.evaluation(s) for s in res.systems}
