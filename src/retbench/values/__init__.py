"""Document values: how much each document of a corpus earns for the queries asked of it.

`exact`: KNN-Shapley (Jia et al., VLDB 2019) and leave-one-out for flat inner-product retrieval with
precision@K or recall@K; `montecarlo`: a seeded permutation estimate with its standard error for any ranking
and any top-K utility (nDCG@K included). Pure NumPy: the study that reads corpora lives in `studies.values`.
"""

from retbench.values.exact import (
    Displaced,
    Judged,
    StreamedValues,
    charges,
    id_tiebreak,
    leave_one_out_sorted,
    ranking_order,
    shapley_sorted,
    shapley_streamed,
)
from retbench.values.montecarlo import (
    Estimate,
    Utility,
    leave_one_out_ranked,
    ndcg_at,
    permutation_shapley,
    precision_at,
    ranks_from_order,
    recall_at,
)

__all__ = [
    "Displaced",
    "Estimate",
    "Judged",
    "StreamedValues",
    "Utility",
    "charges",
    "id_tiebreak",
    "leave_one_out_ranked",
    "leave_one_out_sorted",
    "ndcg_at",
    "permutation_shapley",
    "precision_at",
    "ranking_order",
    "ranks_from_order",
    "recall_at",
    "shapley_sorted",
    "shapley_streamed",
]
