"""retbench: a workbench for benchmarking retrievers.

Everything meets at a Run (qid -> ranked doc ids and scores); judging turns a Run and relevance
judgements into a gain matrix, and every metric is a vectorized function of that matrix.

    >>> import retbench
    >>> retbench.evaluate({"q1": {"d1": 1}}, {"q1": {"d2": 0.9, "d1": 0.5}}, ["mrr", "hit@1"]).means()
    {'mrr': 0.5, 'hit@1': 0.0}

Names are imported on first use (module `__getattr__`), so `import retbench` and the CLI start fast;
`dir(retbench)` lists the public names (`__all__`) and nothing this module uses to provide them.
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "evaluate": "retbench.api",
    "compare": "retbench.api",
    "gate": "retbench.api",  # ship criteria applied: the flow of `retbench gate` (history baselines, checks, record)
    "Evaluation": "retbench.evaluation",
    "Comparison": "retbench.comparison",
    "Run": "retbench.data",
    "RunBuilder": "retbench.data",
    "Qrels": "retbench.data",
    "Corpus": "retbench.data",
    "Dataset": "retbench.data",
    "Document": "retbench.data",
    "Queries": "retbench.data",
    "QueryStatus": "retbench.data",
    "Sample": "retbench.data",
    "load_dataset": "retbench.io.datasets",
    "load_results": "retbench.results",
    "read_results": "retbench.results",  # a results folder -> StudyResult (any layout version)
    "StudyResult": "retbench.results",
    "SystemResult": "retbench.results",
    "MetricValue": "retbench.results",
    "run_experiment": "retbench.studies.benchmark",  # a config (or its path) -> results, reports, history entry
    "read_run": "retbench.io.trec",
    "read_qrels": "retbench.io.trec",
    "write_run": "retbench.io.trec",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> _Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'retbench' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names only: what `from __future__` and the lazy imports bind here is not the API."""
    return sorted(__all__)
