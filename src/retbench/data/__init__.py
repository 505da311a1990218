"""Plain typed containers: Document, Corpus, Queries, Qrels, Run, Sample, Dataset, and the status vocabulary.

The Run is the interchange of the whole product: every retriever produces one, every judge and metric
consumes one (`data/run.py`). Corpus, Queries, Sample and Dataset are the inputs (`data/corpus.py`),
Qrels the graded judgements (`data/qrels.py`), QueryStatus what happened to a query (`data/status.py`),
and `data/ids.py` the 64-bit doc keys behind de-duplication and judging.
"""

from retbench.data.builder import RunBuilder
from retbench.data.corpus import JOIN_RULES, Corpus, Dataset, Document, Queries, Sample, join_title_text
from retbench.data.qrels import Qrels
from retbench.data.run import LazyIds, Run
from retbench.data.status import MISSING, QueryStatus

__all__ = [
    "JOIN_RULES",
    "MISSING",
    "Corpus",
    "Dataset",
    "Document",
    "LazyIds",
    "Qrels",
    "Queries",
    "QueryStatus",
    "Run",
    "RunBuilder",
    "Sample",
    "join_title_text",
]
