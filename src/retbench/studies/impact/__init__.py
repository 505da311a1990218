"""Ingestion impact: is this document worth ingesting, and what does it change?

Per candidate document d and knowledge base K (README "Ingestion impact"):

    Novelty(d, K)      = 1 - max_{c in chunks(d), c' in chunks(K)} cos(c, c')
                         (per chunk: 1 - max_{c'} cos(c, c'); per document: min and mean over d's chunks,
                         with the nearest existing chunk and document; the min is the headline figure)
    dM(d, K)           = M(K + {d}) - M(K)   for M in recall@k, nDCG@k, MRR@k (means over the evaluation queries)
    dContextRecall     = CR(K + {d}) - CR(K); CR(q) = share of q's reference sentences whose best cosine to a
                         sentence of the top-`context_k` retrieved documents is >= threshold (no LLM)
    Gain(d, K)         = alpha * dRecall@k + beta * dContextRecall + gamma * Novelty(d, K)

Modes: `alone` (each candidate against K), `sequential` (cumulative, in a given order: each candidate
against K plus the candidates before it) and `leave_one_out` (documents already in K: M(K) - M(K - {d}),
novelty against K without d).

Modules: `novelty` (NoveltyIndex), `support` (sentence support and context recall), `engine` (what both engines share), `dense` (DenseImpact: exact, nothing re-indexed),
`rebuild` (RebuildImpact: any retriever), `config`, `candidates`, `study` (run_ingest). The records (Impact,
Novelty, GainWeights) and the study's result (`ImpactResult`) live in `retbench.results.impact`; the report is
rendered from them by `retbench.report.impact`.
"""

from __future__ import annotations

from retbench.results.impact import MODES, STATUSES, GainWeights, Impact, ImpactResult, Novelty
from retbench.studies.impact.candidates import (
    CandidateSet,
    build_candidates,
    candidate_status,
    concat_corpora,
    near_duplicate,
    reference_answers,
)
from retbench.studies.impact.config import gain_weights, load_ingest_config, parse_ingest_config
from retbench.studies.impact.dense import DenseImpact
from retbench.studies.impact.engine import RANK_METRICS, rank_specs
from retbench.studies.impact.novelty import ChunkTable, NoveltyIndex, chunk_table, split_sentences, text_hash
from retbench.studies.impact.rebuild import RebuildImpact
from retbench.studies.impact.study import IngestOutcome, run_ingest, study_checks
from retbench.studies.impact.support import ContextRecall, CosineSupport, SentenceSupport

__all__ = [
    "MODES",
    "RANK_METRICS",
    "STATUSES",
    "CandidateSet",
    "ChunkTable",
    "ContextRecall",
    "CosineSupport",
    "DenseImpact",
    "GainWeights",
    "Impact",
    "ImpactResult",
    "IngestOutcome",
    "Novelty",
    "NoveltyIndex",
    "RebuildImpact",
    "SentenceSupport",
    "build_candidates",
    "candidate_status",
    "chunk_table",
    "concat_corpora",
    "gain_weights",
    "load_ingest_config",
    "near_duplicate",
    "parse_ingest_config",
    "rank_specs",
    "reference_answers",
    "run_ingest",
    "split_sentences",
    "study_checks",
    "text_hash",
]
