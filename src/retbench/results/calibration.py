"""What a judge calibration returns: the judge's agreement with human labels, with bootstrap 95% CIs.

Two kinds, one metrics.json each (`write_calibration`, `read_calibration`):

- relevance (`CalibrationResult`): a sample of (query, document) pairs with human labels, judged 0-3: accuracy,
  Cohen's kappa and the confusion matrix with an LLM grade >= `relevant_from` counted relevant; AUC and a
  threshold when the server returns token probabilities; a spot-check with a second prompt; optionally
  Kendall's tau between system rankings under human and under LLM labels.
- rubric metrics (`RubricCalibrationResult`): the stored verdicts of each rubric metric against the golden
  set's human verdicts: accuracy, kappa (weighted for graded scales), AUC, and the prediction-powered mean.

The study (`retbench.studies.labels.calibrate`) computes these; the report (`retbench.report.judge`) formats
them and nothing else. A figure that cannot be computed is None (null on disk), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from retbench.io.files import write_json
from retbench.jsontypes import JSONObject, as_object, counts, opt_float, opt_int, opt_str
from retbench.results.files import read_json


@dataclass(frozen=True)
class Interval:
    """A figure and its bootstrap 95% CI (None where it is undefined, e.g. kappa with one class only)."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None

    @classmethod
    def from_dict(cls, d: object) -> Interval:
        m = as_object(d)
        return cls(opt_float(m.get("value")), opt_float(m.get("ci_low")), opt_float(m.get("ci_high")))


@dataclass(frozen=True)
class Agreement:
    """Agreement over the n pairs both sides judged. A relevance calibration carries `relevant_from`, kappa and
    the confusion matrix (rows human 0/1, columns LLM grade 0..3, with each cell's share CI); a graded rubric
    carries `weighted_kappa` (quadratic) instead of kappa. `missing` says why there is no figure."""

    n: int
    relevant_from: int | None = None
    accuracy: Interval | None = None
    kappa: Interval | None = None
    weighted_kappa: Interval | None = None
    confusion: list[list[int]] | None = None
    confusion_share_ci: list[list[list[float]]] | None = None
    missing: str | None = None

    @property
    def kappa_name(self) -> str:
        return "kappa" if self.weighted_kappa is None else "weighted_kappa"

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Agreement:
        def iv(key: str) -> Interval | None:
            return Interval.from_dict(d[key]) if key in d else None

        confusion, share = d.get("confusion"), d.get("confusion_share_ci")
        return cls(
            opt_int(d.get("n")) or 0,
            opt_int(d.get("relevant_from")),
            iv("accuracy"),
            iv("kappa"),
            iv("weighted_kappa"),
            confusion if isinstance(confusion, list) else None,  # type: ignore[arg-type]
            share if isinstance(share, list) else None,  # type: ignore[arg-type]
            opt_str(d.get("missing")),
        )


@dataclass(frozen=True)
class GradedAgreement:
    """A continuous judge score against binary human labels: AUC with its CI, the accuracy-maximizing threshold
    (score >= t is relevant), its accuracy on the same pairs (optimistic) and cross-validated (the honest one)."""

    n: int
    score: str  # what the score is (an expected grade, or P(yes) at the verdict token)
    auc: Interval
    threshold: float | None = None
    accuracy_at_threshold: float | None = None
    accuracy_cross_validated: float | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> GradedAgreement:
        return cls(
            opt_int(d.get("n")) or 0,
            str(d.get("score")),
            Interval.from_dict(d.get("auc")),
            opt_float(d.get("threshold")),
            opt_float(d.get("accuracy_at_threshold")),
            opt_float(d.get("accuracy_cross_validated")),
        )


@dataclass(frozen=True)
class Reliability:
    """The spot-check: a seeded subset judged again with the check prompt; disagreement over pairs both judged."""

    disagreement_rate: float | None
    spot_check_n: int
    against: str | None
    statuses: dict[str, int] | None = None
    calls: int | None = None

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        return {k: v for k, v in out.items() if v is not None or k in ("disagreement_rate", "against")}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Reliability:
        return cls(
            opt_float(d.get("disagreement_rate")),
            opt_int(d.get("spot_check_n")) or 0,
            opt_str(d.get("against")),
            counts(d["statuses"]) if "statuses" in d else None,
            opt_int(d.get("calls")),
        )


@dataclass(frozen=True)
class SystemScores:
    """A system's metric under human labels and under LLM labels alone (None: undefined, no relevant label)."""

    human: float | None
    llm: float | None


@dataclass(frozen=True)
class RankingCheck:
    """Systems ranked by `metric` under human and under `labels` labels, and Kendall's tau of the two orders."""

    labels: str
    metric: str
    queries: int
    pairs: int
    judged: int
    statuses: dict[str, int]
    systems: dict[str, SystemScores]
    kendall_tau: float | None
    llm_missing: str | None = None

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        if self.llm_missing is None:
            del out["llm_missing"]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> RankingCheck:
        return cls(
            str(d.get("labels")),
            str(d.get("metric")),
            opt_int(d.get("queries")) or 0,
            opt_int(d.get("pairs")) or 0,
            opt_int(d.get("judged")) or 0,
            counts(d.get("statuses")),
            {
                str(s): SystemScores(opt_float(as_object(v).get("human")), opt_float(as_object(v).get("llm")))
                for s, v in as_object(d.get("systems")).items()
            },
            opt_float(d.get("kendall_tau")),
            opt_str(d.get("llm_missing")),
        )


@dataclass(frozen=True)
class Judged:
    """'judged N of M': verdicts obtained of those asked for (failures are counted, never scored)."""

    judged: int
    of: int


@dataclass
class CalibrationResult:
    """A relevance calibration. `judge` is the judge's manifest (identity, stats) or, for a dry run, its
    identity alone with the plan in `estimate`; neither goes to metrics.json (the manifest holds the judge)."""

    judge: JSONObject
    statuses: dict[str, int] = field(default_factory=dict)
    agreement: Agreement | None = None
    graded: GradedAgreement | None = None
    ranking: RankingCheck | None = None
    judge_reliability: Reliability | None = None
    judged: Judged | None = None
    estimate: JSONObject | None = None

    def to_dict(self) -> dict[str, object]:
        """metrics.json: agreement, graded, judge_reliability, statuses, ranking, judged (those present)."""
        out: dict[str, object] = {}
        if self.agreement is not None:
            out["agreement"] = self.agreement.to_dict()
        if self.graded is not None:
            out["graded"] = self.graded.to_dict()
        if self.judge_reliability is not None:
            out["judge_reliability"] = self.judge_reliability.to_dict()
        out["statuses"] = self.statuses
        if self.ranking is not None:
            out["ranking"] = self.ranking.to_dict()
        if self.judged is not None:
            out["judged"] = asdict(self.judged)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object], judge: JSONObject | None = None) -> CalibrationResult:
        ag, gr, rk, rel, jd = (d.get(k) for k in ("agreement", "graded", "ranking", "judge_reliability", "judged"))
        return cls(
            judge or {},
            counts(d.get("statuses")),
            Agreement.from_dict(ag) if isinstance(ag, Mapping) else None,
            GradedAgreement.from_dict(gr) if isinstance(gr, Mapping) else None,
            RankingCheck.from_dict(rk) if isinstance(rk, Mapping) else None,
            Reliability.from_dict(rel) if isinstance(rel, Mapping) else None,
            Judged(opt_int(as_object(jd).get("judged")) or 0, opt_int(as_object(jd).get("of")) or 0)
            if isinstance(jd, Mapping)
            else None,
        )


@dataclass(frozen=True)
class PPIMean:
    """The metric's mean under human verdicts, prediction-powered (n_human verdicted samples correct the judge's
    verdicts on n_llm samples), with its 95% CI; `clipped` names the bound a CI was clipped to."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_human: int
    n_llm: int
    clipped: str | None = None

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        if self.clipped is None:
            del out["clipped"]
        return out


@dataclass(frozen=True)
class RubricResult:
    """One rubric metric against the human verdicts: judged N of M verdicted samples, agreement, AUC, PPI mean."""

    scale: str
    judged: Judged
    statuses: dict[str, int]
    agreement: Agreement
    graded: GradedAgreement | None = None
    ppi: PPIMean | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "scale": self.scale,
            "judged": asdict(self.judged),
            "statuses": self.statuses,
            "agreement": self.agreement.to_dict(),
        }
        if self.graded is not None:
            out["graded"] = self.graded.to_dict()
        if self.ppi is not None:
            out["ppi"] = self.ppi.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> RubricResult:
        jd, gr, ppi = as_object(d.get("judged")), d.get("graded"), d.get("ppi")
        p = as_object(ppi)
        return cls(
            str(d.get("scale")),
            Judged(opt_int(jd.get("judged")) or 0, opt_int(jd.get("of")) or 0),
            counts(d.get("statuses")),
            Agreement.from_dict(as_object(d.get("agreement"))),
            GradedAgreement.from_dict(gr) if isinstance(gr, Mapping) else None,
            PPIMean(
                opt_float(p.get("mean")),
                opt_float(p.get("ci_low")),
                opt_float(p.get("ci_high")),
                opt_int(p.get("n_human")) or 0,
                opt_int(p.get("n_llm")) or 0,
                opt_str(p.get("clipped")),
            )
            if isinstance(ppi, Mapping)
            else None,
        )


@dataclass
class RubricCalibrationResult:
    """Each listed rubric metric's calibration, in the order the config lists them."""

    rubrics: dict[str, RubricResult] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"rubrics": {m: r.to_dict() for m, r in self.rubrics.items()}}


def write_calibration(out: Path, result: CalibrationResult | RubricCalibrationResult) -> None:
    """metrics.json, atomically through the one writer."""
    write_json(out / "metrics.json", result.to_dict())


def read_calibration(out: Path) -> CalibrationResult | RubricCalibrationResult:
    """The result `write_calibration` put in `out` (rubric metrics when it holds `rubrics`)."""
    d = as_object(read_json(out / "metrics.json"))
    if "rubrics" in d:
        return RubricCalibrationResult(
            {str(m): RubricResult.from_dict(as_object(r)) for m, r in as_object(d["rubrics"]).items()}
        )
    return CalibrationResult.from_dict(d)
