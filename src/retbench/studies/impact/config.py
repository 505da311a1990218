"""The ingestion-impact config: keys, validation (every error names the field) and loading."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.config import DatasetSpec, load, validate
from retbench.config.impact import IngestModel
from retbench.errors import ConfigError
from retbench.llm.settings import JudgeSettings
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
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


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


def _source(raw: dict[str, Any], model: Any) -> dict[str, Any]:
    """A candidate source as written, its file (if any) read from the config's folder."""
    return {**raw, "path": model.path} if raw.get("kind") == "file" else dict(raw)


def parse_ingest_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> IngestConfig:
    """Validate an ingestion config mapping (`config.IngestModel`); every error names the field."""
    src = source
    model = validate(IngestModel, raw, src)
    # the same dataset block as every study's: its seed defaults to the top-level one
    ds = model.dataset.to_spec(model.seed)
    check_system(model.retriever.adapter, model.retriever.params, src, "retriever")
    ret = {"params": {}, **(raw.get("retriever") or model.retriever.model_dump(exclude_none=True))}
    names = _metric_names(list(model.metrics), src)
    if model.affected_by is not None and parse_metrics([model.affected_by])[0].name not in names:
        raise ConfigError("affected_by must be one of the metrics", path=src, field="affected_by")
    cr: dict[str, Any] | None = None
    if model.context_recall is not None:
        cr = {**raw["context_recall"], "references": model.context_recall.references}  # a path, resolved
        if model.context_recall.judge is not None:  # an LLM judges sentence support instead of the cosine
            cr["judge"] = JudgeSettings.from_config(cr["judge"], "context_recall.judge", src)
    loo = raw.get("leave_one_out") or {}
    name = model.name or Path(source).stem
    return IngestConfig(
        name=name,
        output=Path(output) if output is not None else Path(model.output or f"results/{name}"),
        dataset=ds,
        retriever=ret,
        metrics=list(model.metrics),
        candidates=[_source(s, m) for s, m in zip(raw["candidates"], model.candidates, strict=True)],
        modes=list(dict.fromkeys(model.modes)),
        relevance_level=model.relevance_level,
        leave_one_out={"group": loo} if isinstance(loo, str) else dict(loo),
        sequential=dict(raw.get("sequential") or {}),
        novelty=dict(raw.get("novelty") or {}),
        context_recall=cr,
        gain=_gain(model, names, src),
        dedupe=model.dedupe,
        affected_by=model.affected_by,
        engine=model.engine,
        encoder=model.encoder.options,
        seed=model.seed,
        source=source,
        raw=raw,
    )


def load_ingest_config(path: str | Path, output: str | Path | None = None) -> IngestConfig:
    """Read and validate an ingestion YAML file (errors name file:line and field)."""
    return load(path, parse_ingest_config, output)
