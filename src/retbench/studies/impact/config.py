"""Loading the ingestion-impact config (`config.IngestModel`, the one typed model) with the checks that need the
study's code: the retriever against its factory, the metrics' cutoffs and the gain's recall metric."""

from __future__ import annotations

from pathlib import Path

from retbench.config.impact import IngestModel
from retbench.config.study import load_study, parse_study
from retbench.errors import ConfigError
from retbench.metrics.registry import parse_metrics
from retbench.results.impact import GainWeights
from retbench.retrievers.base import check_system
from retbench.studies.impact.engine import rank_specs

REMOVING = ("holdout", "gold")  # sources that take documents out of K before the others sample from it


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


def gain_weights(model: IngestModel) -> GainWeights:
    """The gain's weights with its recall metric resolved (`gain.recall`, else the first recall@k of the metrics)."""
    return _gain(model, _metric_names(list(model.metrics), model.source), model.source)


def parse_ingest_config(data: object, source: str = "<config>", output: str | Path | None = None) -> IngestModel:
    """Validate an ingestion config mapping (`config.IngestModel`); every error names the field."""
    return parse_study(data, source, IngestModel, output, check_ingest)


def load_ingest_config(path: str | Path, output: str | Path | None = None) -> IngestModel:
    """Read and validate an ingestion YAML file (errors name file:line and field)."""
    return load_study(path, IngestModel, output, check_ingest)
