"""Rerank stages: a first stage's candidates re-scored by a cross-encoder, a dense model, a `/rerank`
server or a plugin; both runs kept, invariants checked, pair scores cached (see `stage.py`)."""

from retbench.retrievers.rerank.scorers import (
    KINDS,
    BiEncoderReranker,
    CrossEncoderReranker,
    HttpReranker,
    Reranker,
    create_reranker,
    parse_rerank_response,
)
from retbench.retrievers.rerank.stage import (
    RerankFusion,
    RerankSpec,
    RerankStage,
    RerankStats,
    check_depth,
    invariant_problem,
    pair_key,
    parse_rerank,
)

__all__ = [
    "KINDS",
    "BiEncoderReranker",
    "CrossEncoderReranker",
    "HttpReranker",
    "RerankFusion",
    "RerankSpec",
    "RerankStage",
    "RerankStats",
    "Reranker",
    "check_depth",
    "create_reranker",
    "invariant_problem",
    "pair_key",
    "parse_rerank",
    "parse_rerank_response",
]
