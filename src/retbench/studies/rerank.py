"""A system's rerank stage inside a study: keep the first-stage run, rerank it, compare the two.

Files, beside the system's final (reranked) `run.trec`:

    systems/<name>/first_stage/run.trec, status.jsonl, per_query.tsv, aggregates.json

The summary block added to the system's metrics (`metrics.json`) holds the first stage's means,
its recall@depth (the ceiling: a reranker only re-orders those candidates, so the reranked
recall@depth cannot pass it) and the paired comparison reranked vs first stage on the same queries
(mean delta with a bootstrap CI, randomization-test p-value, wins/ties/losses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from retbench.data import Corpus, Queries, Run
from retbench.results import SystemDir, save_run, write_json
from retbench.retrievers.rerank import RerankSpec

Evaluate = Callable[[Run, Sequence[str]], Any]


def rerank_system(
    spec: RerankSpec,
    first: Run,
    queries: Queries,
    corpus: Corpus,
    sysdir: SystemDir,
    metrics: Sequence[str],
    evaluate: Evaluate,
    *,
    name: str,
    where: str = "",
) -> tuple[Run, dict[str, Any], dict[str, Any]]:
    """(reranked run, summary block for metrics.json, manifest block); writes the first stage's files."""
    from retbench.compare import compare_pair

    stage = spec.build(where=where)
    try:
        first_dir = SystemDir(sysdir.root / "first_stage")
        save_run(first, first_dir)
        ceiling = f"recall@{spec.depth}"
        first_eval = evaluate(first, [*metrics, ceiling] if ceiling not in metrics else list(metrics))
        first_eval.to_tsv(first_dir.per_query)
        first_agg = first_eval.aggregate()
        write_json(first_dir.aggregates, first_agg)
        reranked = stage.rerank(first, queries, corpus, name=name)
        final_eval = evaluate(reranked, list(metrics))
        first_eval.system, final_eval.system = "first_stage", name
        pair = compare_pair(first_eval, final_eval, [m for m in final_eval.metrics if m in first_eval.metrics])
    finally:
        stage.reranker.close()
    summary = {
        "first_stage": {m: first_agg[m]["mean"] for m in first_eval.metrics},
        "rerank": {
            "depth": spec.depth,
            "ceiling": {"metric": ceiling, "value": first_agg[ceiling]["mean"]},
            "vs_first_stage": {
                m.metric: {
                    "delta": m.delta,
                    "ci": [m.ci_low, m.ci_high],
                    "p": m.pvalues["randomization"],
                    "wins": m.wins,
                    "ties": m.ties,
                    "losses": m.losses,
                    "n": m.n,
                }
                for m in pair.metrics
            },
        },
    }
    manifest = {**stage.describe(), "fingerprint": stage.reranker.fingerprint(), "pairs": stage.stats.as_dict()}
    return reranked, summary, manifest
