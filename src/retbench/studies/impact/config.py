"""The ingestion-impact config: keys, validation (every error names the field) and loading."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.config import DatasetSpec
from retbench.config.impact import IngestModel
from retbench.config.study import load_study, parse_study
from retbench.errors import ConfigError
from retbench.metrics.registry import parse_metrics
from retbench.retrievers.base import check_system
from retbench.studies.impact.engine import rank_specs
from retbench.studies.impact.model import GainWeights

REMOVING = ("holdout", "gold")  # sources that take documents out of K before the others sample from it


@dataclass
class IngestConfig:
    """A validated ingestion-impact experiment (see configs/ingest.yaml for every key)."""

    name: str
    output: Path
    dataset: DatasetSpec
    retriever: dict[str, Any]
    metrics: list[str]
    candidates: list[dict[str, Any]]
    modes: list[str]
    model: IngestModel  # the validated config it is derived from (the manifest records it)
    relevance_level: int = 1
    leave_one_out: dict[str, Any] = field(default_factory=dict)
    sequential: dict[str, Any] = field(default_factory=dict)
    novelty: dict[str, Any] = field(default_factory=dict)
    context_recall: dict[str, Any] | None = None
    gain: GainWeights = field(default_factory=GainWeights)
    dedupe: str = "text"
    affected_by: str | None = None
    engine: str = "auto"
    encoder: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    @property
    def source(self) -> str:
        return self.model.source


def _metric_names(metrics: list[str], src: str) -> list[str]:
    """Registry names of the rank metrics (each needs a cutoff: the engine keeps that many per query)."""
    try:
        specs = rank_specs(metrics)
    except ConfigError as exc:
        raise ConfigError(exc.reason, path=src, field="metrics") from None
    return [s.name for s in specs]


def _gain(model: IngestModel, names: list[str], src: str) -> GainWeights:
    g = model.gain
    recall = g.recall or next((m for m in names if m.startswith("recall")), None)
    if recall is None:
        raise ConfigError("no recall@k among the metrics; name the gain's recall metric", path=src, field="gain.recall")
    recall = parse_metrics([recall])[0].name
    if recall not in names:
        raise ConfigError(
            f"gain.recall {recall!r} must be one of the metrics ({', '.join(names)})", path=src, field="gain.recall"
        )
    return GainWeights(float(g.alpha), float(g.beta), float(g.gamma), recall, g.novelty)


def check_ingest(model: IngestModel) -> None:
    """What the model alone cannot check, before any work: the retriever against its factory, the metrics'
    cutoffs, `affected_by` and the gain's recall metric among the metrics."""
    src = model.source
    check_system(model.retriever.adapter, model.retriever.params, src, "retriever")
    names = _metric_names(list(model.metrics), src)
    if model.affected_by is not None and parse_metrics([model.affected_by])[0].name not in names:
        raise ConfigError("affected_by must be one of the metrics", path=src, field="affected_by")
    _gain(model, names, src)


def study_config(model: IngestModel) -> IngestConfig:
    """What the study derives from its validated model, once (blocks as set in the config, paths resolved)."""
    cr: dict[str, Any] | None = None
    if model.context_recall is not None:
        cr = model.context_recall.model_dump(exclude_unset=True) | {"references": model.context_recall.references}
        if model.context_recall.judge is not None:  # an LLM judges sentence support instead of the cosine
            cr["judge"] = model.context_recall.judge
    loo = model.leave_one_out
    return IngestConfig(
        name=model.study_name,
        output=model.output_dir,
        dataset=model.dataset.to_spec(model.seed),  # the same dataset block as every study's
        retriever={"params": {}, **model.retriever.model_dump(exclude_none=True)},
        metrics=list(model.metrics),
        candidates=[c.model_dump(exclude_unset=True) for c in model.candidates],
        modes=list(dict.fromkeys(model.modes)),
        relevance_level=model.relevance_level,
        leave_one_out=loo.model_dump(exclude_unset=True) if loo is not None else {},
        sequential=model.sequential.model_dump(exclude_unset=True),
        novelty=model.novelty.model_dump(exclude_unset=True),
        context_recall=cr,
        gain=_gain(model, _metric_names(list(model.metrics), model.source), model.source),
        dedupe=model.dedupe,
        affected_by=model.affected_by,
        engine=model.engine,
        encoder=model.encoder.options,
        seed=model.seed,
        model=model,
    )


def parse_ingest_config(data: object, source: str = "<config>", output: str | Path | None = None) -> IngestConfig:
    """Validate an ingestion config mapping (`config.IngestModel`); every error names the field."""
    return study_config(parse_study(data, source, IngestModel, output, check_ingest))


def load_ingest_config(path: str | Path, output: str | Path | None = None) -> IngestConfig:
    """Read and validate an ingestion YAML file (errors name file:line and field)."""
    return study_config(load_study(path, IngestModel, output, check_ingest))
