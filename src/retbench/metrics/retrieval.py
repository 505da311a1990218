"""The retrieval metrics as registry entries: each ranking, text-match and label-coverage function
(metrics/ranking.py, metrics/text.py, metrics/coverage.py) with its name, aliases, cutoff rule and
trec_eval names."""

from __future__ import annotations

import retbench.metrics.coverage as coverage
import retbench.metrics.ranking as ranking
import retbench.metrics.scope as scope
import retbench.metrics.text as text
from retbench.metrics.base import Builtin
from retbench.metrics.trec_rows import SUCCESS_CUTOFFS, TREC_CUTOFFS


def builtins() -> list[Builtin]:
    """These metrics as registry entries (the registry registers them at import)."""

    r = ranking
    return [
        Builtin(
            "hit",
            "k",
            lambda c, k, lv, p: r.hit(c.gm, k, lv),
            "1 if any relevant doc is in the top k",
            ("success", "retrieval-hit-at-k"),
            trec_cut="success_{k}",
            trec_defaults=SUCCESS_CUTOFFS,
            label="hit rate",
            meaning="share of questions with at least one relevant document in the top {k} results",
            unit="share",
        ),
        Builtin(
            "recall",
            "k",
            lambda c, k, lv, p: r.recall(c.gm, k, lv) if c.items is None else c.items.recall(k),
            "relevant docs in the top k / all relevant (with a passage judge: gold items matched / all)",
            ("r", "retrieval-recall-at-k"),
            trec_cut="recall_{k}",
            trec_defaults=TREC_CUTOFFS,
            label="recall",
            meaning="share of the relevant documents that appear in the top {k} results",
            unit="share",
        ),
        Builtin(
            "P",
            "k",
            lambda c, k, lv, p: r.precision(c.gm, k, lv),  # type: ignore[arg-type]
            "relevant docs in the top k / k",
            ("precision",),
            trec_cut="P_{k}",
            trec_defaults=TREC_CUTOFFS,
            label="precision",
            meaning="share of the top {k} results that are relevant",
            unit="share",
        ),
        Builtin(
            "f1",
            "k",
            lambda c, k, lv, p: r.f1(c.gm, k, lv) if c.items is None else c.items.f1(k),  # type: ignore[arg-type]
            "harmonic mean of P@k and recall@k",
            meaning="balance of precision and recall in the top {k} (their harmonic mean)",
        ),
        Builtin(
            "rprec",
            "none",
            lambda c, k, lv, p: r.rprec(c.gm, lv),
            "precision at rank R (number relevant)",
            ("r-prec", "r_prec"),
            trec="Rprec",
            label="R-precision",
            meaning="precision at rank R, where R is the number of relevant documents",
            unit="share",
        ),
        Builtin(
            "mrr",
            "optional",
            lambda c, k, lv, p: r.reciprocal_rank(c.gm, k, lv),
            "1 / rank of the first relevant doc",
            ("rr", "recip_rank", "retrieval-mrr"),
            trec="recip_rank",
            label="MRR",
            meaning="average of 1 / rank of the first relevant result (1.0 = always first, 0 = never found)",
        ),
        Builtin(
            "map",
            "optional",
            lambda c, k, lv, p: r.average_precision(c.gm, k, lv),
            "average precision",
            ("ap",),
            trec="map",
            trec_cut="map_cut_{k}",
            trec_defaults=TREC_CUTOFFS,
            label="MAP",
            meaning="mean average precision: precision averaged over the ranks of every relevant document",
        ),
        Builtin(
            "ndcg",
            "optional",
            lambda c, k, lv, p: r.ndcg(c.gm, k),
            "nDCG with linear gains (trec_eval)",
            ("retrieval-ndcg-at-k",),
            binary=False,
            trec="ndcg",
            trec_cut="ndcg_cut_{k}",
            trec_defaults=TREC_CUTOFFS,
            label="nDCG",
            meaning="ranking quality of the top {k} that rewards relevant documents placed higher (1.0 = ideal order)",
        ),
        Builtin(
            "ndcg_exp",
            "k",
            lambda c, k, lv, p: r.ndcg(c.gm, k, exp=True),
            "nDCG with 2^g - 1 gains",
            binary=False,
            label="nDCG_exp",
            meaning="nDCG of the top {k} with exponential gains, so highly relevant documents count far more",
        ),
        Builtin(
            "recall_any",
            "k",
            lambda c, k, lv, p: (
                text.recall_groups(c, k, lv, require_all=False) if c.items is None else c.items.recall_any(k)
            ),
            "1 if any support id is in the top k",
            label="recall (any support)",
            meaning="share of questions with at least one of their supporting documents in the top {k}",
            unit="share",
        ),
        Builtin(
            "recall_all",
            "k",
            lambda c, k, lv, p: (
                text.recall_groups(c, k, lv, require_all=True) if c.items is None else c.items.recall_all(k)
            ),
            "1 if every support group has an id in the top k",
            label="recall (all supports)",
            meaning="share of questions where every required supporting document is in the top {k}",
            unit="share",
        ),
        Builtin(
            "containment",
            "k",
            lambda c, k, lv, p: text.containment(c, k),
            "1 if the expected answer occurs in a top-k doc's text",
            ("answer-containment-at-k", "answer_containment"),
            binary=False,
            meaning="share of questions whose expected answer appears word for word in one of the top {k} texts",
            unit="share",
        ),
        Builtin(
            "hybrid",
            "k",
            lambda c, k, lv, p: r.hybrid_log_rank(c.gm, k, lv, p["alpha"], p["gamma"]),
            "alpha * recall + (1 - alpha) * log-rank quality",
            ("hybrid_log_rank",),
            params={"alpha": 0.5, "gamma": 1.0},
            param_ranges={"alpha": (0.0, 1.0)},
            meaning="a blend of recall and how high the relevant documents rank in the top {k}",
        ),
        Builtin(
            "judged",
            "k",
            lambda c, k, lv, p: coverage.judged_at_k(c, k),
            "share of the top k with any label",
            ("judged_at_k",),
            binary=False,
            meaning="share of the top {k} results that have a relevance label (human or LLM)",
            unit="share",
        ),
        Builtin(
            "holes",
            "k",
            lambda c, k, lv, p: coverage.holes_at_k(c, k),
            "share of the top k with no label (hole rate)",
            ("hole_rate", "holes_at_k"),
            binary=False,
            lower_is_better=True,  # an unlabelled result is an unknown, never a good
            meaning="share of the top {k} results nobody has labelled (their relevance is unknown)",
            unit="share",
        ),
        Builtin(
            "scope_miss_rate",
            "none",
            lambda c, k, lv, p: scope.scope_miss(c, lv),
            "1 if the scope chosen (before any fallback) holds none of the gold supports",
            ("scope_miss",),
            lower_is_better=True,
            keeps_unanswered=True,
            label="scope miss rate",
            meaning="share of answerable questions whose chosen folder or metadata scope excluded every gold "
            "support (scoped systems only)",
            unit="share",
        ),
    ]
