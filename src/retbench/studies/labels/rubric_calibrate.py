"""Calibration of rubric metrics: the judge's stored verdicts against the verdicts people gave.

People record their verdict on a sample's answer in the golden set, `metadata.human: {metric: value}` (1/0
or true/false on a yes/no scale, an integer 0..N on a graded one). The judge's verdicts are the ones an
experiment stored (`systems/<system>/judged.json`), so calibrating makes no call. Per metric:

- agreement on the samples carrying both: accuracy and Cohen's kappa (yes/no) or quadratic weighted kappa
  (0..N), with bootstrap 95% CIs (studies/labels/agreement.py);
- on a yes/no scale, when the judge's server gave token probabilities, the AUC of P(yes) against the human
  verdicts, the best threshold and its cross-validated accuracy;
- the metric's mean under human verdicts estimated by prediction-powered inference (`stats.ppi_mean`,
  classical PPI: the judge's mean over every judged sample corrected by the human-minus-judge difference on
  the samples people verdicted) where at least 2 samples carry both and 1 more has a judge verdict only;
- "judged N of M": the human-verdicted samples whose stored verdict failed or was never asked are counted.

A human verdict off the metric's scale is an input error naming the sample and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retbench.config.calibration import CalibrationModel, RubricCalibration
from retbench.data.corpus import Sample
from retbench.errors import InputError
from retbench.estimates import estimate_block
from retbench.jsontypes import opt_float, opt_int, opt_str
from retbench.metrics.judged import verdict
from retbench.metrics.rubric import Rubric, rubric_of
from retbench.results.calibration import (
    Agreement,
    GradedAgreement,
    Judged,
    PPIMean,
    RubricCalibrationResult,
    RubricResult,
    write_calibration,
)
from retbench.studies.labels import agreement as ag


def human_verdict(rubric: Rubric, value: object, where: str, fld: str) -> int:
    """A person's verdict as a grade on the rubric's scale; anything else is an input error naming it."""
    grade = rubric.human(value)
    if grade is None:
        raise InputError(
            f"human verdict {value!r} is not on the scale {rubric.scale} of {rubric.name}", path=where, field=fld
        )
    return grade


def _one(
    rubric: Rubric, samples: Sequence[Sample], stored: dict[str, Any], cfg: CalibrationModel, where: str
) -> RubricResult:
    pairs: list[tuple[int, int, float | None]] = []
    statuses: dict[str, int] = {}
    unlabelled: list[float] = []
    for s in samples:
        given = s.metadata.get("human")
        human = given.get(rubric.name) if isinstance(given, Mapping) else None
        value, status = verdict(stored.get(s.id), rubric.record)
        if human is None:
            if status == "ok":
                unlabelled.append(float(value["value"]))
            continue
        h = human_verdict(rubric, human, where, f"{s.id}.metadata.human.{rubric.name}")
        statuses[status] = statuses.get(status, 0) + 1
        if status == "ok":
            expected = (stored[s.id][rubric.record] or {}).get("expected")
            pairs.append((h, int(value["value"]), expected))
    agreement = ag.verdict_agreement(
        [p[0] for p in pairs], [p[1] for p in pairs], rubric.high, cfg.bootstrap, cfg.sample.seed
    )
    graded: GradedAgreement | None = None
    ppi: PPIMean | None = None
    scored = [(h, e) for h, _, e in pairs if e is not None]
    if rubric.binary and scored:
        graded = GradedAgreement.from_dict(
            {
                **ag.graded_agreement([h for h, _ in scored], [e for _, e in scored], cfg.bootstrap, cfg.sample.seed),
                "score": "P(yes) at the verdict token",
            }
        )
    if len(pairs) >= 2 and unlabelled:
        from retbench.stats import ppi_mean

        y = np.array([p[0] for p in pairs], dtype=float)
        f = np.array([p[1] for p in pairs], dtype=float)
        est, low, high = ppi_mean(y, f, np.array(unlabelled), alpha=0.05)
        scale = (0.0, 1.0 if rubric.binary else float(rubric.high or 1))  # a PPI interval may leave the scale
        block = estimate_block("ppi", len(pairs), len(pairs) + len(unlabelled), est, low, high, scale)
        ppi = PPIMean(
            opt_float(block["mean"]),
            opt_float(block["ci_low"]),
            opt_float(block["ci_high"]),
            opt_int(block["n_human"]) or 0,
            opt_int(block["n_llm"]) or 0,
            opt_str(block.get("clipped")),
        )
    return RubricResult(
        rubric.scale,
        Judged(len(pairs), sum(statuses.values())),
        statuses,
        Agreement.from_dict(agreement),
        graded,
        ppi,
    )


def calibrate_rubrics(cfg: CalibrationModel, spec: RubricCalibration) -> RubricCalibrationResult:
    """Agreement of each listed rubric metric with the golden set's human verdicts; writes metrics.json."""
    import json

    from retbench.io.datasets import load_dataset
    from retbench.results.layout import SystemDir

    ds = load_dataset(cfg.dataset, [cfg.split])
    path = SystemDir.of(spec.results, spec.system).judged
    if not path.is_file():
        raise InputError("no judged verdicts here: run the experiment with these rubric metrics first", path=path)
    saved = json.loads(path.read_text(encoding="utf-8"))
    stored = saved.get("verdicts", {})
    defined = (saved.get("judging") or {}).get("rubrics") or {}
    where = str(Path(ds.path or cfg.dataset))
    out = RubricCalibrationResult()
    for i, m in enumerate(spec.metrics):
        rubric = Rubric.from_definition(defined[m]["definition"]) if m in defined else rubric_of(m)
        if rubric is None:
            raise InputError(
                f"{m!r} is not a rubric metric (declare it under rubrics: in the experiment)",
                path=cfg.source,
                field=f"rubrics.metrics[{i}]",
            )
        out.rubrics[m] = _one(rubric, list(ds.samples.values()), stored, cfg, where)
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    write_calibration(cfg.output_dir, out)
    return out
