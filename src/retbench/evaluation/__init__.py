"""Evaluation: judge a Run against relevance, compute the per-query table, aggregate it.

`evaluate(run, relevance, metrics, settings)` is the one entry point; it returns an `Evaluation`: a
query x metric float64 table plus the status of every query, what was skipped and why, and the
counting mode. Relevance is human or LLM qrels (doc id -> grade per query) or a passage judge's
`Judgement` (spans, anchors, text, cosine: a gain matrix plus the gold items each query has); every
metric works with either, and the counting rules below are the same for both. With a judgement,
recall, recall_any, recall_all and f1 count gold items rather than relevant chunks (see
`metrics/judges/common.py`) and "no relevant document" means "no gold item".
`EvalSettings` (metrics/settings.py) holds how runs are counted and summarized; the config loader parses it.

Counting rules (docs/howto/metrics.md, "Conventions"; each is a test):
- the denominator is every judged query (qrels order); a judged query the system did not answer
  (`missing`) or that failed (`error` / `timeout` / `invalid`) scores each metric's worst value (0.0, or the
  top of its range where lower is better: a missing answer is never a good one) and is counted, as
  `trec_eval -c` counts it; nothing is imputed;
- queries with no document at or above the relevance level follow `no_relevant`: `skip` (the trec_eval
  mode's default: left out of the denominator and listed in `skipped`), `zero` (the pytrec_eval mode's default:
  counted and scored as trec_eval and pytrec_eval score them, measures that divide by the relevant count give 0,
  and averaged as BEIR averages them) or `one` (counted, 1.0 on every
  metric: the "vacuously perfect" reading, where nothing relevant was missed); a metric with its own
  level (`recall@10(rel=2)`) follows the same policy at its level, for its column alone (`skip`: NaN,
  left out of its mean), so it equals the metric evaluated with that relevance level (`eval -l 2`);
- `mode="pytrec_eval"` averages over the judged queries the system answered (present in the run
  and not failed), which is what pytrec_eval and BEIR report; the mode is carried in every output;
- queries in the run that are not judged are ignored (listed in `unjudged`).

The package: `table` holds the `Evaluation` (the per-query table, its aggregation and files), `scoring` the
`evaluate` that builds one; both are importable from here. `EvalSettings` is imported from its own module,
`retbench.metrics.settings`, and `coverage` from `retbench.metrics.coverage`.
"""

from __future__ import annotations

from retbench.evaluation.scoring import Relevance, evaluate
from retbench.evaluation.table import Evaluation

__all__ = ["Evaluation", "Relevance", "evaluate"]
