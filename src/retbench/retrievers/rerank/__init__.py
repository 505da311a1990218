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
    RerankStage,
    RerankStats,
    build_rerank,
    check_rerank,
    invariant_problem,
    pair_key,
)

__all__ = [
    "KINDS",
    "BiEncoderReranker",
    "CrossEncoderReranker",
    "HttpReranker",
    "RerankFusion",
    "RerankStage",
    "RerankStats",
    "Reranker",
    "build_rerank",
    "check_rerank",
    "create_reranker",
    "invariant_problem",
    "pair_key",
    "parse_rerank_response",
]
