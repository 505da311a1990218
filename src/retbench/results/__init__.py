"""The results directory: one place that knows where every file lives and how to read it back.

<out>/manifest.json                     config, versions, fingerprints, join rule, timings, machine
<out>/metrics.json                      {system: {metric: mean, ..., "coverage": {...}, "latency": {...},
                                        "breakdown"?: {...}, "usage"?: {...}}} (results/usage.py)
<out>/systems/<system>/run.trec         the system's TREC run (checkable with trec_eval)
<out>/systems/<system>/status.jsonl     {"qid", "status", "latency", "error"?} per query
<out>/systems/<system>/per_query.tsv    query × metric table (failed queries hold 0)
<out>/systems/<system>/aggregates.json  {metric: {"mean", "ci_low", "ci_high", "n"}}, breakdowns
<out>/systems/<system>/done.json        written last: the system is finished (resume skips it)
<out>/systems/<system>/journal.jsonl    per-query results (and answers) as they arrive (resume after a kill)
<out>/systems/<system>/answers.jsonl    a RAG system's answer side per query, rebuilt from the journal
"""

from retbench.results.files import (
    AppendLog,
    load_run,
    read_json,
    save_run,
    write_json,
    write_jsonl,
    write_status,
    write_text,
)
from retbench.results.layout import SystemDir
from retbench.results.read import Results, load_results

__all__ = [
    "AppendLog",
    "Results",
    "SystemDir",
    "load_results",
    "load_run",
    "read_json",
    "save_run",
    "write_json",
    "write_jsonl",
    "write_status",
    "write_text",
]
