"""The ir_measures families as registry rows: gdeval's ERR, RBP and its residual, the C/W/L measures, and
ndeval's diversity measures over subtopic qrels.

Each row names the reference implementation its values are checked against (tests/parity/metrics/), and
its formulas live beside the array code (`metrics/user_models.py`). Their aggregate is the plain mean over
queries, as each reference averages them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

import retbench.metrics.diversity as div
import retbench.metrics.user_models as um
from retbench.data import Qrels
from retbench.errors import ConfigError
from retbench.metrics.base import Builtin, MetricContext
from retbench.metrics.judges.qrels import _flatten
from retbench.metrics.judges.subtopics import SubtopicHits, SubtopicQrels, judge_subtopics

RowFn = Callable[[MetricContext, np.ndarray | None, int, Mapping[str, float]], np.ndarray]


def _checked(name: str, fn: RowFn) -> RowFn:
    """A row function whose ValueError (a grade or parameter the measure cannot take) names the metric."""

    def run(ctx: MetricContext, k: np.ndarray | None, level: int, params: Mapping[str, float]) -> np.ndarray:
        try:
            return fn(ctx, k, level, params)
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(f"metric {name!r}: {exc}", field="metric") from None

    return run


def judged_positions(ctx: MetricContext) -> tuple[np.ndarray, np.ndarray]:
    """(row, 0-based rank) of every ranked document judged with a grade >= 0, found by `Run.locate`.

    A negative grade reads as unjudged, as trec_eval 10.0 reads it (-1 is its own code for "not in the
    pool"). Without qrels (a passage judge decides every ranked item) every ranked document is judged.
    """
    gm = ctx.gm
    if ctx.qrels is None or ctx.run is None or ctx.run_rows is None:
        rows = np.repeat(np.arange(len(gm), dtype=np.int64), gm.lengths)
        return rows, np.arange(len(rows), dtype=np.int64) - np.repeat(np.cumsum(gm.lengths) - gm.lengths, gm.lengths)
    qids = gm.query_ids
    rows, docs, grades = ctx.qrels.columns(qids) if isinstance(ctx.qrels, Qrels) else _flatten(ctx.qrels, qids)
    in_run = ctx.run_rows[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero((in_run >= 0) & (np.asarray(grades) >= 0))
    which, ranks = ctx.run.locate(in_run[sel], docs[sel])
    return rows[sel][which], np.asarray(ranks, dtype=np.int64)


def _rbp(c: MetricContext, k: np.ndarray | None, lv: int, p: Mapping[str, float]) -> np.ndarray:
    return um.rbp(c.gm, p["p"], lv if "rel" in p else None)


def _rbp_resid(c: MetricContext, k: np.ndarray | None, lv: int, p: Mapping[str, float]) -> np.ndarray:
    rows, ranks = judged_positions(c)
    return um.rbp_residual(c.gm, p["p"], rows, ranks)


def _cwl(measure: str, param: str = "T") -> RowFn:
    def fn(c: MetricContext, k: np.ndarray | None, lv: int, p: Mapping[str, float]) -> np.ndarray:
        if not p.get("max_rel"):  # names.rewrite refuses such a name; this guards specs built in code
            raise ConfigError(f"{measure} needs max_rel, the top grade of the qrels' scale", field="metric")
        return um.cwl(c.gm, measure, k, p.get(param, 1.0), p["min_rel"], p["max_rel"])

    return fn


def _diversity(name: str, fn: Callable[[SubtopicHits, np.ndarray | None, Mapping[str, float]], np.ndarray]) -> RowFn:
    def run(c: MetricContext, k: np.ndarray | None, lv: int, p: Mapping[str, float]) -> np.ndarray:
        sq = c.subtopics if c.subtopics is not None else c.qrels
        if not isinstance(sq, SubtopicQrels):
            raise ConfigError(
                f"{name} needs subtopic qrels (query subtopic doc grade per line, ndeval's format): give them "
                "with --subtopic-qrels FILE, or read them with retbench.io.subtopics.read_subtopic_qrels and "
                "pass them to evaluate",
                field="metric",
            )
        values = fn(judge_subtopics(c.run, sq, c.gm.query_ids, c.run_rows, lv), k, p)
        if c.subtopics is not None:  # a query the subtopic qrels do not judge: ndeval does not score it
            judged = np.fromiter((q in sq for q in c.gm.query_ids), dtype=bool, count=len(c.gm))
            values = np.where(judged, values, np.nan)
        return values

    return _checked(name, run)


_CWL_PARAMS = {"min_rel": 0.0, "max_rel": 0.0}
_CWL_RANGES = {"min_rel": (0.0, 1e9), "max_rel": (1e-9, 1e9)}


def builtins() -> list[Builtin]:
    """These metrics as registry entries (the registry registers them at import)."""
    return [
        Builtin(
            "err",
            "optional",
            _checked("err", lambda c, k, lv, p: um.err(c.gm, k)),
            "expected reciprocal rank, R = (2^g - 1) / 16 (reference: gdeval.pl's err@k)",
            binary=False,
            label="ERR",
            meaning="chance-weighted 1 / rank at which a user finds what they need in the top {k}, "
            "with highly relevant documents more likely to satisfy",
        ),
        Builtin(
            "rbp",
            "none",
            _checked("rbp", _rbp),
            "rank-biased precision (1 - p) sum gain_i p^(i-1); graded gains unless rel= is given "
            "(references: trec_eval 10.0's rbp, cwl_eval's RBP, ir_measures' RBP(rel=..))",
            params={"p": 0.9},
            param_ranges={"p": (1e-9, 1.0 - 1e-9)},
            trec="rbp",
            trec_cut="rbp_p={p:g}",  # trec_eval 10 prints its name=value parameters: `-m rbp.p=0.5` is rbp_p=0.5
            label="RBP",
            meaning="expected rate of relevance a user finds who reads on from each result with probability p",
        ),
        Builtin(
            "rbp_resid",
            "none",
            _checked("rbp_resid", _rbp_resid),
            "1 - (1 - p) sum_{judged i} p^(i-1): how much RBP could still grow if every unjudged ranked document "
            "(and, once one is unjudged, the ranking's tail) were relevant; 0 when every ranked document is "
            "judged, however short the ranking (reference: trec_eval 10.0's rbp_resid)",
            binary=False,
            lower_is_better=True,  # the room left by unjudged documents: an uncertainty, never a good
            params={"p": 0.9},
            param_ranges={"p": (1e-9, 1.0 - 1e-9)},
            trec="rbp_resid",
            trec_cut="rbp_resid_p={p:g}",
            label="RBP residual",
            meaning="how far RBP could still rise if the unlabelled results were relevant (0 when every returned "
            "result is labelled)",
        ),
        Builtin(
            "INST",
            "none",
            _checked("INST", _cwl("INST")),
            "C/W/L INST, adaptive to T, the gain the user wants; max_rel required (reference: cwl_eval's INST)",
            binary=False,
            params={"T": 1.0, **_CWL_PARAMS},
            param_ranges=_CWL_RANGES,
            label="INST",
            meaning="expected rate of gain of a user who stops sooner once they have found the T relevant results they want",
        ),
        Builtin(
            "INSQ",
            "none",
            _checked("INSQ", _cwl("INSQ")),
            "C/W/L INSQ, continuation ((i + 2T - 1) / (i + 2T))^2; max_rel required (reference: cwl_eval's INSQ)",
            binary=False,
            params={"T": 1.0, **_CWL_PARAMS},
            param_ranges=_CWL_RANGES,
            label="INSQ",
            meaning="expected rate of gain of a user who reads deeper the more relevant results (T) they expect",
        ),
        Builtin(
            "BPM",
            "k",
            _checked("BPM", _cwl("BPM")),
            "C/W/L bejeweled player model (static): reads until gain T or k documents; max_rel required (reference: cwl_eval's BPM)",
            binary=False,
            params={"T": 1.0, **_CWL_PARAMS},
            param_ranges=_CWL_RANGES,
            label="BPM",
            meaning="average gain per result read by a user who stops after gain T or {k} results, whichever comes first",
        ),
        Builtin(
            "SDCG",
            "k",
            _checked("SDCG", _cwl("SDCG")),
            "DCG@k over the DCG of k fully relevant documents; max_rel required (reference: cwl_eval's NDCG-k, ir_measures' SDCG)",
            binary=False,
            params=dict(_CWL_PARAMS),
            param_ranges=_CWL_RANGES,
            label="SDCG",
            meaning="DCG of the top {k} as a share of what {k} fully relevant results would give",
        ),
        *_nerr_rows(),
        *_diversity_rows(),
    ]


def _nerr_rows() -> list[Builtin]:
    """cwl_eval's NERR measures (C/W/L forms of ERR; metrics/user_models.py); reference: cwl_eval's NERReq8..11."""
    doc = "C/W/L form of ERR, Azzopardi et al. 2021 eq. {}; max_rel required (reference: cwl_eval's NERReq{})"
    rows = []
    for eq, cut, extra in [(8, "k", {}), (9, "k", {}), (10, "none", {"p": 0.9}), (11, "none", {"T": 1.0})]:
        name = f"NERR{eq}"
        rows.append(
            Builtin(
                name,
                cut,
                _checked(name, _cwl(name, "p" if eq == 10 else "T")),
                doc.format(eq, eq),
                binary=False,
                params={**extra, **_CWL_PARAMS},
                param_ranges=_CWL_RANGES,
                label=name,
                meaning="expected rate of gain of a user who stops at each result with the chance it satisfies "
                + (
                    "them, within the top {k}"
                    if cut == "k"
                    else "them, and otherwise reads on as " + ("RBP's p" if eq == 10 else "INST's T") + " says"
                ),
            )
        )
    return rows


def _diversity_rows() -> list[Builtin]:
    """ndeval's measures over subtopic qrels (metrics/diversity.py); reference: pyndeval, ir_measures' ndeval."""
    return [
        Builtin(
            "alpha_nDCG",
            "k",
            _diversity("alpha_nDCG", lambda h, k, p: div.alpha_ndcg(h, k, p["alpha"])),  # type: ignore[arg-type]
            "alpha-nDCG@k against ndeval's greedy ideal (reference: ndeval's alpha-nDCG@k)",
            ("alpha_ndcg", "alpha-nDCG"),
            params={"alpha": 0.5},
            param_ranges={"alpha": (0.0, 1.0)},
            label="alpha-nDCG",
            meaning="ranking quality of the top {k} that rewards covering each of the query's subtopics, "
            "and covering a subtopic again less (1.0 = greedy ideal)",
        ),
        Builtin(
            "ERR_IA",
            "k",
            _diversity("ERR_IA", lambda h, k, p: div.err_ia(h, k)),  # type: ignore[arg-type]
            "intent-aware ERR with ndeval's collection-independent normalization (reference: ndeval's ERR-IA@k)",
            ("err-ia",),
            label="ERR-IA",
            meaning="expected reciprocal rank averaged over the query's subtopics, with repeats worth less",
        ),
        Builtin(
            "NRBP",
            "none",
            _diversity("NRBP", lambda h, k, p: div.nrbp(h, p["alpha"], p["beta"])),
            "novelty- and rank-biased precision (reference: ndeval's NRBP)",
            params={"alpha": 0.5, "beta": 0.5},
            param_ranges={"alpha": (0.0, 1.0), "beta": (1e-9, 1.0)},
            label="NRBP",
            meaning="rank-biased precision over the query's subtopics, with a subtopic seen again worth less",
        ),
        Builtin(
            "nERR_IA",
            "k",
            _diversity("nERR_IA", lambda h, k, p: div.n_err_ia(h, k)),  # type: ignore[arg-type]
            "ERR-IA@k over the greedy ideal ranking's (reference: ndeval's nERR-IA@k)",
            ("nerr-ia",),
            label="nERR-IA",
            meaning="intent-aware expected reciprocal rank of the top {k} as a share of the greedy ideal's",
        ),
        Builtin(
            "alpha_DCG",
            "k",
            _diversity("alpha_DCG", lambda h, k, p: div.alpha_dcg(h, k, p["alpha"])),  # type: ignore[arg-type]
            "alpha-DCG@k over that of a ranking relevant to every subtopic (reference: ndeval's alpha-DCG@k)",
            ("alpha-DCG",),
            params={"alpha": 0.5},
            param_ranges={"alpha": (0.0, 1.0)},
            label="alpha-DCG",
            meaning="subtopic-aware DCG of the top {k}, in units of a ranking relevant to every subtopic",
        ),
        Builtin(
            "nNRBP",
            "none",
            _diversity("nNRBP", lambda h, k, p: div.n_nrbp(h, p["alpha"], p["beta"])),
            "NRBP over the greedy ideal ranking's (reference: ndeval's nNRBP)",
            params={"alpha": 0.5, "beta": 0.5},
            param_ranges={"alpha": (0.0, 1.0), "beta": (1e-9, 1.0)},
            label="nNRBP",
            meaning="novelty- and rank-biased precision as a share of the greedy ideal ranking's",
        ),
        Builtin(
            "AP_IA",
            "none",
            _diversity("AP_IA", lambda h, k, p: div.ap_ia(h)),
            "intent-aware average precision: AP per subtopic, averaged over the subtopics (reference: ndeval's MAP-IA)",
            ("map-ia",),
            label="AP-IA",
            meaning="average precision for each of the query's subtopics, averaged over them",
        ),
        Builtin(
            "P_IA",
            "k",
            _diversity("P_IA", lambda h, k, p: div.precision_ia(h, k)),  # type: ignore[arg-type]
            "intent-aware precision: relevant (doc, subtopic) pairs in the top k / (k M) (reference: ndeval's P-IA@k)",
            ("p-ia",),
            label="P-IA",
            meaning="precision of the top {k} averaged over the query's subtopics",
        ),
        Builtin(
            "STREC",
            "k",
            _diversity("STREC", lambda h, k, p: div.subtopic_recall(h, k)),  # type: ignore[arg-type]
            "subtopics with a relevant doc in the top k / subtopics (reference: ndeval's strec@k)",
            ("strecall", "s-recall", "subtopic_recall"),
            label="S-recall",
            meaning="share of the query's subtopics covered by the top {k} results",
            unit="share",
        ),
    ]
