"""trec_eval's measures beyond the headline ones, as registry rows (functions in metrics/incomplete.py and
metrics/trec_more.py), and trec_eval's own tables: the order it prints measure families in and its
nicknames (`official`, `all_trec`, `set`), from its `measures.c` (trec_eval 10.0)."""

from __future__ import annotations

import retbench.metrics.incomplete as inc
import retbench.metrics.trec_more as tm
from retbench.metrics.base import Builtin
from retbench.metrics.ranking import average_precision

INF = float("inf")
#: trec_eval's default cutoffs of P, recall, ndcg_cut, map_cut, relative_P (`m_P.c` and friends)
TREC_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
SUCCESS_CUTOFFS = (1, 5, 10)
UNJ_CUTOFFS = (5, 10, 20)
RPREC_MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)

#: measure families in the order trec_eval computes and prints them (`te_trec_measures`), whatever the order of -m
TREC_ORDER = (
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg",
    "binG", "G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success",
    "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "rbp", "rbp_resid", "unj",
)  # fmt: skip
#: trec_eval's nicknames (runid and relstring name the run and print a string: retbench has no row for them)
TREC_NICKNAMES = {
    "official": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
        "iprec_at_recall", "P",
    ),
    "all_trec": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
        "iprec_at_recall", "P", "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility",
        "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg",
        "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret",
    ),
    "set": (
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall",
        "set_relative_P", "set_map", "set_F",
    ),
}  # fmt: skip

COUNT = (0.0, INF)


def builtins() -> list[Builtin]:
    """These measures as registry entries (the registry registers them at import)."""
    return [
        Builtin(
            "num_q",
            "none",
            lambda c, k, lv, p: inc.num_q(c.gm),
            "number of queries (1 per query; the total is the count)",
            binary=False,
            trec="num_q",
            value_range=COUNT,
            aggregate="sum",
            per_query_line=False,
            keeps_unanswered=True,
            label="queries",
            meaning="how many queries were scored",
        ),
        Builtin(
            "num_ret",
            "none",
            lambda c, k, lv, p: inc.num_ret(c.gm),
            "documents retrieved",
            binary=False,
            trec="num_ret",
            value_range=COUNT,
            aggregate="sum",
            label="retrieved",
            meaning="how many documents the system returned (summed over queries)",
        ),
        Builtin(
            "num_rel",
            "none",
            lambda c, k, lv, p: inc.num_rel(c.gm, lv),
            "relevant documents judged",
            trec="num_rel",
            value_range=COUNT,
            aggregate="sum",
            keeps_unanswered=True,
            label="relevant",
            meaning="how many documents are judged relevant (summed over queries)",
        ),
        Builtin(
            "num_rel_ret",
            "none",
            lambda c, k, lv, p: inc.num_rel_ret(c.gm, lv),
            "relevant documents retrieved",
            trec="num_rel_ret",
            value_range=COUNT,
            aggregate="sum",
            label="relevant retrieved",
            meaning="how many relevant documents the system returned (summed over queries)",
        ),
        Builtin(
            "gm_map",
            "none",
            lambda c, k, lv, p: average_precision(c.gm, None, lv),
            "average precision, summed up by its geometric mean (floor 1e-5)",
            trec="gm_map",
            aggregate="gmean",
            per_query_line=False,
            label="GMAP",
            meaning="geometric mean of average precision: rewards being decent on every question",
        ),
        Builtin(
            "bpref",
            "none",
            lambda c, k, lv, p: inc.bpref(c.gm, lv),
            "binary preference: relevant docs ranked above judged non-relevant ones (Buckley and Voorhees 2004)",
            trec="bpref",
            label="bpref",
            meaning="how often relevant documents come before documents judged not relevant; unjudged ones are ignored",
        ),
        Builtin(
            "iprec_at_recall",
            "none",
            lambda c, k, lv, p: tm.iprec_at_recall(c.gm, p["recall"], lv, c.recall_rounding),
            "interpolated precision at a recall level (the precision-recall curve)",
            params={"recall": 0.0},
            param_ranges={"recall": (0.0, 1.0)},
            trec_cut="iprec_at_recall_{recall:.2f}",
            trec_params=("recall",),
            trec_defaults=tm.ELEVEN_POINTS,
            show_params=True,
            label="interpolated precision",
            meaning="the best precision reachable once that share of the relevant documents is found",
        ),
        Builtin(
            "infAP",
            "none",
            lambda c, k, lv, p: inc.infap(c.gm, lv),
            "inferred average precision over a sampled pool (Yilmaz and Aslam 2006)",
            trec="infAP",
            label="infAP",
            meaning="average precision estimated from sampled judgements; in-pool unjudged documents are inferred",
        ),
        Builtin(
            "gm_bpref",
            "none",
            lambda c, k, lv, p: inc.bpref(c.gm, lv),
            "bpref, summed up by its geometric mean (floor 1e-5)",
            trec="gm_bpref",
            aggregate="gmean",
            per_query_line=False,
            label="geometric bpref",
            meaning="geometric mean of bpref: rewards being decent on every question",
        ),
        Builtin(
            "rprec_mult",
            "none",
            lambda c, k, lv, p: tm.rprec_mult(c.gm, p["mult"], lv),
            "precision at mult x R documents",
            params={"mult": 1.0},
            param_ranges={"mult": (0.0, 1e6)},
            trec_cut="Rprec_mult_{mult:.2f}",
            trec_params=("mult",),
            trec_defaults=RPREC_MULTS,
            show_params=True,
            label="R-precision multiple",
            meaning="precision at a multiple of R, the number of relevant documents",
        ),
        Builtin(
            "utility",
            "none",
            lambda c, k, lv, p: tm.utility(c.gm, p["a"], p["b"], p["c"], p["d"], lv, c.collection_size),
            "a*rel_ret + b*nonrel_ret + c*rel_not_ret + d*nonrel_not_ret (trec_eval; N from the collection size)",
            params={"a": 1.0, "b": -1.0, "c": 0.0, "d": 0.0},
            trec="utility",
            trec_cut="utility_{a:g},{b:g},{c:g},{d:g}",
            trec_params=("a", "b", "c", "d"),
            value_range=(-INF, INF),
            label="utility",
            meaning="a linear score of relevant and non-relevant documents returned and missed",
        ),
        Builtin(
            "iprec_11pt",
            "none",
            lambda c, k, lv, p: tm.eleven_point_average(c.gm, lv, c.recall_rounding),
            "mean interpolated precision at recall 0, 0.1, ..., 1",
            ("11pt_avg",),
            trec="11pt_avg",
            label="11-point average",
            meaning="average of the precision-recall curve at 11 recall levels",
        ),
        Builtin(
            "binG",
            "none",
            lambda c, k, lv, p: tm.bin_g(c.gm, lv),
            "binary G: mean over relevant docs of 1 / log2(2 + non-relevant docs above)",
            trec="binG",
            label="binG",
            meaning="rewards relevant documents by how few non-relevant ones come before them",
        ),
        Builtin(
            "G",
            "none",
            lambda c, k, lv, p: tm.gain_g(c.gm),
            "normalized gain G (trec_eval, experimental)",
            binary=False,
            trec="G",
            label="G",
            meaning="graded gain of each document discounted by how far the ranking trails the ideal",
        ),
        Builtin(
            "ndcg_rel",
            "none",
            lambda c, k, lv, p: tm.ndcg_rel(c.gm),
            "nDCG averaged over the ranks of the relevant documents",
            binary=False,
            trec="ndcg_rel",
            label="nDCG at relevant",
            meaning="nDCG averaged over the positions of the relevant documents",
        ),
        Builtin(
            "Rndcg",
            "none",
            lambda c, k, lv, p: tm.rndcg(c.gm, max(lv, 1), n_rel=None if lv else tm.judged_count(c.gm)),
            "nDCG averaged at the R-level points of the ideal ranking",
            trec="Rndcg",
            label="R-nDCG",
            meaning="nDCG averaged at the depths where the ideal ranking's grade drops",
        ),
        Builtin(
            "relative_P",
            "k",
            lambda c, k, lv, p: tm.relative_precision(c.gm, k, lv),  # type: ignore[arg-type]
            "relevant docs in the top k / min(k, R)",
            trec_cut="relative_P_{k}",
            trec_defaults=TREC_CUTOFFS,
            label="relative precision",
            meaning="precision in the top {k} against the best possible when fewer than {k} are relevant",
        ),
        Builtin(
            "set_P",
            "none",
            lambda c, k, lv, p: tm.set_precision(c.gm, lv),
            "relevant retrieved / retrieved",
            trec="set_P",
            label="set precision",
            meaning="share of all returned documents that are relevant",
            unit="share",
        ),
        Builtin(
            "set_relative_P",
            "none",
            lambda c, k, lv, p: tm.set_relative_precision(c.gm, lv),
            "relevant retrieved / min(retrieved, R)",
            trec="set_relative_P",
            label="set relative precision",
            meaning="set precision against the best possible for that many documents",
        ),
        Builtin(
            "set_recall",
            "none",
            lambda c, k, lv, p: tm.set_recall(c.gm, lv),
            "relevant retrieved / R",
            trec="set_recall",
            label="set recall",
            meaning="share of the relevant documents returned at any depth",
            unit="share",
        ),
        Builtin(
            "set_map",
            "none",
            lambda c, k, lv, p: tm.set_map(c.gm, lv),
            "set precision x set recall",
            trec="set_map",
            label="set MAP",
            meaning="set precision times set recall (unranked average precision)",
        ),
        Builtin(
            "set_F",
            "none",
            lambda c, k, lv, p: tm.set_f(c.gm, p["beta"], lv),
            "(beta + 1) P R / (beta P + R) over the returned set (trec_eval's weighting)",
            params={"beta": 1.0},
            param_ranges={"beta": (0.0, 1e6)},
            trec="set_F",
            trec_cut="set_F_{beta:g}",
            trec_params=("beta",),
            label="set F",
            meaning="balance of set precision and set recall",
        ),
        Builtin(
            "num_nonrel_judged_ret",
            "none",
            lambda c, k, lv, p: inc.num_nonrel_judged_ret(c.gm, lv),
            "judged non-relevant documents retrieved",
            trec="num_nonrel_judged_ret",
            value_range=COUNT,
            aggregate="sum",
            label="judged non-relevant retrieved",
            meaning="how many returned documents were judged not relevant (summed over queries)",
        ),
        Builtin(
            "unj",
            "k",
            lambda c, k, lv, p: inc.unjudged(c.gm, k),  # type: ignore[arg-type]
            "unjudged docs in the top k / k (trec_eval 10.0)",
            binary=False,
            trec_cut="unj_{k}",
            trec_defaults=UNJ_CUTOFFS,
            label="unjudged",
            lower_is_better=True,  # an unjudged slot is an unknown, never a good
            meaning="share of the top {k} slots holding a document nobody judged",
            unit="share",
        ),
    ]
