"""A system's rerank stage inside a study: keep the first-stage run, rerank it, compare the two.

Files, beside the system's final (reranked) `run.trec`:

    systems/<name>/first_stage/run.trec, status.jsonl, per_query.tsv, aggregates.json

The system's result (`SystemResult.first_stage`, `.rerank`) holds the first stage's values,
its recall@depth (the ceiling: a reranker only re-orders those candidates, so the reranked
recall@depth cannot pass it) and the paired comparison reranked vs first stage on the same queries
(mean delta with a bootstrap CI, randomization-test p-value, wins/ties/losses).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from retbench.comparison import compare_pair
from retbench.config.experiment import RerankBlock
from retbench.data import Run
from retbench.evaluation import Evaluation
from retbench.io.files import write_json
from retbench.results import SystemDir, save_run
from retbench.results.blocks import RerankSummary
from retbench.results.model import metric_values
from retbench.retrievers.rerank import build_rerank
from retbench.studies.cell_contract import CellData, Reranked

Evaluate = Callable[[Run, Sequence[str]], Evaluation]


@dataclass
class RerankStage:
    """A cell's rerank stage (`studies.cell_contract.RerankStage`): first-stage run -> `Reranked`.

    `evaluate(run, metrics)` scores a run as the study does (its qrels and evaluation settings).
    """

    spec: RerankBlock
    data: CellData
    sysdir: SystemDir
    metrics: Sequence[str]
    evaluate: Evaluate
    name: str
    where: str = ""

    def __call__(self, first: Run) -> Reranked:
        """The reranked run, the first stage's values, the rerank block and the manifest block; writes the first
        stage's files."""
        spec, metrics = self.spec, self.metrics
        stage = build_rerank(spec, where=self.where)
        try:
            first_dir = SystemDir(self.sysdir.root / "first_stage")
            save_run(first, first_dir)
            ceiling = f"recall@{spec.depth}"
            first_eval = self.evaluate(first, [*metrics, ceiling] if ceiling not in metrics else list(metrics))
            first_eval.to_tsv(first_dir.per_query)
            first_agg = first_eval.aggregate()
            write_json(first_dir.aggregates, first_agg)
            reranked = stage.rerank(first, self.data.queries, self.data.corpus, name=self.name)
            final_eval = self.evaluate(reranked, list(metrics))
            first_eval.system, final_eval.system = "first_stage", self.name
            pair = compare_pair(first_eval, final_eval, [m for m in final_eval.metrics if m in first_eval.metrics])
        finally:
            stage.reranker.close()
        block: RerankSummary = {
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
        }
        manifest: dict[str, object] = {
            **stage.describe(),
            "fingerprint": stage.reranker.fingerprint(),
            "pairs": stage.stats.as_dict(),
        }
        return Reranked(reranked, spec.depth, metric_values(first_agg, first_eval.metrics), block, manifest)
