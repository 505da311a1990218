"""The results directory: one place that knows where every file lives and how to read it back.

<out>/manifest.json                     config, versions, fingerprints, join rule, timings, machine
<out>/metrics.json                      {"schema_version": 2, "systems": {system: {"metrics": {metric: {"value",
                                        "ci_low", "ci_high", "n", ...}}, "coverage", "latency", blocks...}}}
                                        (results/model.py; written by results/write.py, read by results/read.py)
<out>/systems/<system>/run.trec         the system's TREC run (checkable with trec_eval)
<out>/systems/<system>/run.arrow        the same run, columnar (Arrow IPC): what load_run reads while it is newer
<out>/systems/<system>/status.jsonl     {"qid", "status", "latency", "error"?} per query
<out>/systems/<system>/per_query.tsv    query × metric table (failed queries hold 0)
<out>/systems/<system>/aggregates.json  {metric: {"mean", "ci_low", "ci_high", "n"}}, breakdowns
<out>/systems/<system>/done.json        written last: the system is finished (resume skips it)
<out>/systems/<system>/journal.jsonl    per-query results (and answers) as they arrive (resume after a kill)
<out>/systems/<system>/answers.jsonl    a RAG system's answer side per query, rebuilt from the journal
"""

from retbench.results.files import load_run, read_json, save_run, write_status
from retbench.results.layout import SystemDir
from retbench.results.model import MetricValue, StudyManifest, StudyResult, SystemResult
from retbench.results.read import load_results, read_results
from retbench.results.write import write_results

__all__ = [
    "MetricValue",
    "StudyManifest",
    "StudyResult",
    "SystemDir",
    "SystemResult",
    "load_results",
    "load_run",
    "read_json",
    "read_results",
    "save_run",
    "write_results",
    "write_status",
]
