"""retbench: a workbench for benchmarking retrievers.

Everything meets at a Run (qid -> ranked doc ids and scores); judging turns a Run and relevance
judgements into a gain matrix, and every metric is a vectorized function of that matrix.
"""

from retbench.data import Corpus, Dataset, Document, Qrels, Queries, QueryStatus, Run, RunBuilder, Sample

__version__ = "0.1.0"

__all__ = [
    "Corpus",
    "Dataset",
    "Document",
    "Qrels",
    "Queries",
    "QueryStatus",
    "Run",
    "RunBuilder",
    "Sample",
    "__version__",
]
