"""Calibration before trust: how often does the judge agree with people, and does it rank systems alike?

1. A stratified sample of human-judged pairs: `relevant` pairs from the qrels and `nonrelevant` pairs.
   When the qrels judge only relevant documents (SciFact does), non-relevant pairs are BM25's top
   `nonrelevant_depth` documents that the qrels leave unjudged: hard negatives, read as not relevant
   as BEIR's evaluation reads them (some may be relevant; say so when reporting).
2. The judge grades each pair 0-3; agreement (accuracy, Cohen's kappa, confusion, bootstrap CIs) is
   computed on the pairs it judged, and the rest are counted by status ("judged N of M").
3. Optional `ranking`: each listed system answers `queries` sampled queries; every pooled top-`depth`
   pair is judged, and Kendall's tau compares the systems' nDCG@depth order under human and under
   LLM labels.
4. Spot-check reliability: `spot_check` pairs re-judged with `judge.check_prompt`; the disagreement
   rate goes into metrics.json as `judge_reliability: {disagreement_rate, spot_check_n}`.
5. Graded relevance from token probabilities: when the judge's server returns log-probabilities (the
   judge's `extra: {logprobs: true, top_logprobs: 5}`), each pair's expected grade (sum of grade x its
   probability at the grade token) is a continuous score; `graded` reports its ROC AUC against the human
   labels (the probability that a random relevant pair scores above a random non-relevant one, ties half)
   and the threshold on the expected grade that maximizes accuracy on these pairs, beside kappa.

A figure with nothing under it is missing, never 0: with no verdict, agreement says so (`missing`), and
a system's nDCG under LLM labels is null with the reason (`llm_missing`) rather than 0.0.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from retbench.config.calibration import CalibrationModel
from retbench.config.study import load_study, parse_study
from retbench.data import Corpus, Dataset, Queries, Run
from retbench.results.calibration import (
    Agreement,
    CalibrationResult,
    GradedAgreement,
    Judged,
    RankingCheck,
    Reliability,
    RubricCalibrationResult,
    SystemScores,
    write_calibration,
)
from retbench.retrievers.base import check_system, create

if TYPE_CHECKING:  # loaded when a calibration runs (it may start a model server)
    from retbench.llm.judge import Judge


def check_calibration(cfg: CalibrationModel) -> None:
    """The ranking systems' adapters against their factories, before any work (errors name the field)."""
    for i, s in enumerate(cfg.ranking.systems if cfg.ranking else []):
        check_system(s.adapter, s.params, cfg.source, f"ranking.systems[{i}]")


def parse_calibration(data: object, source: str = "<config>", output: Path | None = None) -> CalibrationModel:
    """A validated calibration config (`config.calibration.CalibrationModel`); errors name the field."""
    return parse_study(data, source, CalibrationModel, output, check_calibration)


def load_calibration(path: str | Path, output: Path | None = None) -> CalibrationModel:
    """Read and check a calibration config; errors name the file, line and field."""
    return load_study(path, CalibrationModel, output, check_calibration)


def _bm25_run(
    corpus: Corpus, queries: Queries, depth: int, adapter: str = "bm25s", params: dict | None = None, name: str = "bm25"
) -> Run:

    retriever = create(adapter, params or {}, name=name)
    retriever.index(corpus)
    return retriever.search(queries, depth)


def sample_pairs(cfg: CalibrationModel, ds: Dataset) -> list[tuple[str, str, int]]:
    """(query, doc, human label 0/1): `relevant` judged-relevant pairs and `nonrelevant` negatives, seeded."""
    human = ds.split(cfg.split)
    rng = random.Random(cfg.sample.seed)
    positives = [(q, d, 1) for q in human if q in ds.queries for d, g in human[q].items() if g >= 1 and d in ds.corpus]
    negatives = [(q, d, 0) for q in human if q in ds.queries for d, g in human[q].items() if g <= 0 and d in ds.corpus]
    chosen = rng.sample(positives, min(cfg.sample.relevant, len(positives)))
    if len(negatives) < cfg.sample.nonrelevant:  # qrels without judged non-relevant documents: BM25 hard negatives
        qids = sorted({q for q, _, _ in chosen}) or [q for q in human if q in ds.queries][: cfg.sample.nonrelevant]
        run = _bm25_run(ds.corpus, ds.queries.subset(qids), cfg.sample.nonrelevant_depth)
        negatives += [(q, d, 0) for q in qids if q in run for d in run.docs(q) if d not in human[q]]
    chosen += rng.sample(negatives, min(cfg.sample.nonrelevant, len(negatives)))
    return chosen


def run_calibration(
    cfg: CalibrationModel, *, dry_run: bool = False, echo: Callable[[str], object] = print
) -> CalibrationResult | RubricCalibrationResult:
    """Sample, judge, score agreement, spot-check, and (optionally) compare system rankings; writes metrics.json.

    A dry run returns the judge's identity and the plan (`estimate`) and writes nothing."""
    from retbench.io.datasets import load_dataset
    from retbench.io.files import write_json, write_jsonl
    from retbench.llm.judge import Judge, open_base_url
    from retbench.report.judge import estimate_line
    from retbench.studies.labels import agreement as ag
    from retbench.studies.labels.relevance import judge_items
    from retbench.studies.manifest import manifest_header

    if cfg.rubrics is not None:
        from retbench.studies.labels.rubric_calibrate import calibrate_rubrics

        return calibrate_rubrics(cfg, cfg.rubrics)
    ds = load_dataset(cfg.dataset, [cfg.split])
    pairs = sample_pairs(cfg, ds)
    out = cfg.output_dir
    log = out / "judge_calls.jsonl"
    with open_base_url(cfg.relevance_judge) as url:
        judge = Judge(cfg.relevance_judge, base_url=url, log_path=None if dry_run else log)
        items = judge_items([(q, d) for q, d, _ in pairs], ds.queries, ds.corpus, cfg.max_chars)
        est = judge.estimate(items)
        if dry_run:
            return CalibrationResult({"identity": judge.identity.to_dict()}, estimate=est)
        echo(estimate_line(est))
        verdicts = judge.judge(items)
        ok = [(h, v) for (_, _, h), v in zip(pairs, verdicts, strict=True) if v.ok]
        statuses = dict(judge.stats.statuses)
        agreement = Agreement.from_dict(
            ag.agreement(
                [h for h, _ in ok], [v.value for _, v in ok], cfg.relevant_from, cfg.bootstrap, cfg.sample.seed
            )
        )
        if not ok:
            agreement = replace(agreement, missing=_no_verdict(statuses, len(pairs)))
        scored = [(h, v.expected) for h, v in ok if v.expected is not None]
        graded = (
            GradedAgreement.from_dict(
                ag.graded_agreement([h for h, _ in scored], [e for _, e in scored], cfg.bootstrap, cfg.sample.seed)
            )
            if scored
            else None
        )
        result = CalibrationResult(
            judge={},
            statuses=statuses,
            agreement=agreement,
            graded=graded,
            ranking=_ranking(cfg, ds, judge) if cfg.ranking else None,
            judge_reliability=_spot_check(cfg, url, items, verdicts, log),
            judged=Judged(statuses.get("ok", 0), len(pairs)),
        )
        result.judge = judge.manifest()
    out.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "query_id": q,
            "doc_id": d,
            "human": h,
            "llm": v.value,
            "status": v.status,
            **({"probabilities": v.probabilities, "expected": v.expected} if v.probabilities else {}),
        }
        for (q, d, h), v in zip(pairs, verdicts, strict=True)
    ]
    write_jsonl(out / "pairs.jsonl", rows, ensure_ascii=True)
    write_calibration(out, result)
    write_json(out / "manifest.json", {**manifest_header(cfg, kind="calibration"), "judge": result.judge})
    return result


def _spot_check(cfg: CalibrationModel, url: str, items: list, verdicts: list, log: Path) -> Reliability:
    """Re-judge a seeded random subset with the check prompt; disagreement over pairs both judged."""
    from retbench.llm.judge import Judge
    from retbench.studies.labels.agreement import disagreement

    judged = [i for i, v in enumerate(verdicts) if v.ok]
    if not cfg.spot_check or not cfg.relevance_judge.check_prompt or not judged:
        return Reliability(None, 0, None)
    picked = sorted(random.Random(cfg.sample.seed + 1).sample(judged, min(cfg.spot_check, len(judged))))
    check = Judge(cfg.relevance_judge, cfg.relevance_judge.check_prompt, base_url=url, log_path=log)
    again = check.judge([items[i] for i in picked])
    both = [(verdicts[i].value, v.value) for i, v in zip(picked, again, strict=True) if v.ok]
    return Reliability(
        disagreement([a for a, _ in both], [b for _, b in both], cfg.relevant_from),
        len(both),
        f"prompt {check.prompt.id}",
        dict(check.stats.statuses),
        check.stats.calls,
    )


def _ranking(cfg: CalibrationModel, ds: Dataset, judge: Judge) -> RankingCheck | None:
    """nDCG@depth of each system under human labels and under LLM labels alone, and Kendall's tau of the orders."""
    from retbench.data.qrels import Qrels
    from retbench.evaluation import evaluate
    from retbench.studies.labels.agreement import kendall_tau
    from retbench.studies.labels.relevance import judge_items, pool

    spec = cfg.ranking
    if spec is None:
        return None
    depth = spec.depth
    human = ds.split(cfg.split)
    qids = sorted(random.Random(cfg.sample.seed + 2).sample([q for q in human if q in ds.queries], spec.queries))
    runs = [_bm25_run(ds.corpus, ds.queries.subset(qids), depth, s.adapter, s.params, s.name) for s in spec.systems]
    pairs = [(q, d) for q, docs in pool(runs, depth, qids).items() for d in docs]
    verdicts = judge.judge(judge_items(pairs, ds.queries, ds.corpus, cfg.max_chars))
    llm: dict[str, dict[str, int]] = {}
    for v in verdicts:
        if v.ok:
            llm.setdefault(v.key[0], {})[v.key[1]] = int(v.value)
    metric = f"ndcg@{depth}"
    human_scores = [evaluate(r, human.subset(qids), [metric]).aggregate(ci=False)[metric]["mean"] for r in runs]
    llm_scores = [
        _defined(evaluate(r, Qrels(llm), [metric]).aggregate(ci=False)[metric]["mean"]) if llm else None for r in runs
    ]
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    return RankingCheck(
        labels="llm",
        metric=metric,
        queries=len(qids),
        pairs=len(pairs),
        judged=sum(1 for v in verdicts if v.ok),
        statuses=statuses,
        systems={r.name: SystemScores(h, m) for r, h, m in zip(runs, human_scores, llm_scores, strict=True)},
        kendall_tau=kendall_tau(human_scores, [float(m) for m in llm_scores if m is not None])
        if all(m is not None for m in llm_scores)
        else None,
        llm_missing=_llm_missing(statuses, len(pairs), llm) if None in llm_scores else None,
    )


def _defined(mean: float) -> float | None:
    """A mean over no query (NaN: every query skipped for want of a relevant label) is missing, not a number."""
    return None if mean != mean else float(mean)


def _llm_missing(statuses: dict[str, int], total: int, llm: dict[str, dict[str, int]]) -> str:
    if not llm:
        return _no_verdict(statuses, total)
    return "no sampled query has a relevant LLM label, so nDCG is undefined for some system (its queries are skipped)"


def _no_verdict(statuses: dict[str, int], total: int) -> str:
    """Why a figure from LLM labels is missing: no pair got a verdict, and what became of them."""
    rest = ", ".join(f"{c} {s}" for s, c in sorted(statuses.items()) if s != "ok" and c)
    return f"no LLM verdict: 0 of {total} pairs judged" + (f" ({rest})" if rest else "")
