"""The ingestion-impact config: keys, validation (every error names the field) and loading."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.config import DatasetSpec, EncoderSettings, is_int, known_keys, load, positive_int, require
from retbench.errors import ConfigError
from retbench.metrics.registry import parse_metrics
from retbench.studies.impact.engine import rank_specs
from retbench.studies.impact.model import MODES, GainWeights

TOP_KEYS = {
    "name",
    "description",
    "output",
    "dataset",
    "retriever",
    "metrics",
    "relevance_level",
    "candidates",
    "modes",
    "leave_one_out",
    "sequential",
    "novelty",
    "context_recall",
    "gain",
    "dedupe",
    "affected_by",
    "engine",
    "encoder",
    "seed",
}
SOURCE_KEYS = {
    "file": {"kind", "path", "group"},
    "holdout": {"kind", "n", "seed", "group"},
    "gold": {"kind", "queries", "seed", "group"},
    "present": {"kind", "n", "seed", "group"},
    "near_duplicate": {"kind", "n", "edits", "seed", "group"},
}
REMOVING = ("holdout", "gold")  # sources that take documents out of K before the others sample from it
ENGINES = ("auto", "incremental", "rebuild", "reindex")


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


def _retriever(raw: Mapping[str, Any], src: str) -> dict[str, Any]:
    ret = raw.get("retriever") or {
        "adapter": "dense",
        "params": {"index": "flat_ip", "normalize": True, "max_seq_length": 256},
    }
    require(
        isinstance(ret, dict) and isinstance(ret.get("adapter"), str),
        "retriever needs an adapter",
        src,
        "retriever.adapter",
    )
    known_keys(ret, {"name", "adapter", "params"}, src, "retriever")
    require(isinstance(ret.get("params", {}) or {}, dict), "params must be a mapping", src, "retriever.params")
    return {"params": {}, **ret}


def _metric_names(metrics: Any, src: str) -> list[str]:
    require(
        isinstance(metrics, list) and all(isinstance(m, str) for m in metrics),
        "metrics must be a list of names",
        src,
        "metrics",
    )
    try:
        specs = rank_specs(metrics)
    except ConfigError as exc:
        raise ConfigError(exc.reason, path=src, field="metrics") from None
    return [s.name for s in specs]


def _source(s: Any, src: str, where: str) -> dict[str, Any]:
    require(
        isinstance(s, dict) and s.get("kind") in SOURCE_KEYS,
        f"a candidate source is a mapping with kind in {', '.join(SOURCE_KEYS)}",
        src,
        f"{where}.kind",
    )
    known_keys(s, SOURCE_KEYS[s["kind"]], src, where)
    for key in ("n", "queries", "edits"):
        if key in s:
            positive_int(s[key], src, f"{where}.{key}")
    if s["kind"] == "file":
        require(
            isinstance(s.get("path"), str), "give the path of a BEIR corpus.jsonl of candidates", src, f"{where}.path"
        )
    else:
        how_many = "queries" if s["kind"] == "gold" else "n"
        require(how_many in s, "say how many", src, f"{where}.{how_many}")
    return dict(s)


def _leave_one_out(raw: Mapping[str, Any], modes: list[str], src: str) -> dict[str, Any]:
    loo = raw.get("leave_one_out") or {}
    if isinstance(loo, str):
        loo = {"group": loo}
    require(
        isinstance(loo, dict),
        "leave_one_out is a mapping: {ids: [...]}, {sample: N} or {group: name}",
        src,
        "leave_one_out",
    )
    known_keys(loo, {"ids", "sample", "seed", "group"}, src, "leave_one_out")
    require(
        "leave_one_out" not in modes or bool(loo),
        "mode leave_one_out needs a leave_one_out block",
        src,
        "leave_one_out",
    )
    return loo


def _sequential(raw: Mapping[str, Any], src: str) -> dict[str, Any]:
    seq = raw.get("sequential") or {}
    require(isinstance(seq, dict), "sequential must be a mapping", src, "sequential")
    known_keys(seq, {"order"}, src, "sequential")
    require(
        seq.get("order", "given") in ("given", "gain"),
        "order is 'given' or 'gain' (alone gain, best first)",
        src,
        "sequential.order",
    )
    return seq


def _novelty(raw: Mapping[str, Any], src: str) -> dict[str, Any]:
    nov = raw.get("novelty") or {}
    require(isinstance(nov, dict), "novelty must be a mapping", src, "novelty")
    known_keys(nov, {"chunker"}, src, "novelty")
    require(
        nov.get("chunker") is None or isinstance(nov["chunker"], dict),
        "chunker is a mapping {kind: ..., ...} or null",
        src,
        "novelty.chunker",
    )
    return nov


def _context_recall(raw: Mapping[str, Any], src: str) -> dict[str, Any] | None:
    cr = raw.get("context_recall")
    if cr is None:
        return None
    require(
        isinstance(cr, dict) and "references" in cr,
        "context_recall needs references (gold_documents or a JSONL path)",
        src,
        "context_recall.references",
    )
    known_keys(cr, {"references", "threshold", "context_k", "judge", "max_chars"}, src, "context_recall")
    for key in ("context_k", "max_chars"):
        if key in cr:
            positive_int(cr[key], src, f"context_recall.{key}")
    if cr.get("judge") is not None:  # an LLM judges sentence support instead of the cosine threshold
        from retbench.llm.settings import JudgeSettings

        try:
            cr = {**cr, "judge": JudgeSettings.from_config(cr["judge"], where="context_recall.judge")}
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=src, field=exc.field) from None
    return cr


def _gain(raw: Mapping[str, Any], names: list[str], src: str) -> GainWeights:
    g = raw.get("gain") or {}
    require(isinstance(g, dict), "gain must be a mapping", src, "gain")
    known_keys(g, {"alpha", "beta", "gamma", "recall", "novelty"}, src, "gain")
    for key in ("alpha", "beta", "gamma"):
        v = g.get(key, 0.0)
        require(isinstance(v, (int, float)) and not isinstance(v, bool), "must be a number", src, f"gain.{key}")
    recall = g.get("recall") or next((m for m in names if m.startswith("recall")), None)
    require(recall is not None, "no recall@k among the metrics; name the gain's recall metric", src, "gain.recall")
    recall = parse_metrics([str(recall)])[0].name
    require(
        recall in names, f"gain.recall {recall!r} must be one of the metrics ({', '.join(names)})", src, "gain.recall"
    )
    require(g.get("novelty", "min") in ("min", "mean"), "novelty aggregate is 'min' or 'mean'", src, "gain.novelty")
    alpha, beta, gamma = float(g.get("alpha", 1.0)), float(g.get("beta", 1.0)), float(g.get("gamma", 0.01))
    return GainWeights(alpha, beta, gamma, recall, g.get("novelty", "min"))


def parse_ingest_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> IngestConfig:
    """Validate an ingestion config mapping; every error names the field."""
    src = source
    require(isinstance(raw, dict), "an ingestion config must be a mapping", src, "<top>")
    known_keys(raw, TOP_KEYS, src, "")
    seed = raw.get("seed", 0)
    require(is_int(seed), f"seed must be an integer, got {seed!r}", src, "seed")
    # the same dataset block as every study's (DatasetSpec): its seed defaults to the top-level one
    ds = DatasetSpec.from_config(raw.get("dataset", "scifact"), src, "dataset", seed=seed)
    ret = _retriever(raw, src)
    metrics = raw.get("metrics", ["recall@10", "ndcg@10", "mrr@10"])
    names = _metric_names(metrics, src)
    level = raw.get("relevance_level", 1)
    positive_int(level, src, "relevance_level")
    sources = raw.get("candidates")
    require(isinstance(sources, list) and len(sources) > 0, "list at least one candidate source", src, "candidates")
    cands = [_source(s, src, f"candidates[{i}]") for i, s in enumerate(sources)]
    modes = raw.get("modes", ["alone"])
    require(
        isinstance(modes, list) and bool(modes) and all(m in MODES for m in modes),
        f"modes must be a list from {', '.join(MODES)}",
        src,
        "modes",
    )
    loo, seq, nov, cr = (
        _leave_one_out(raw, modes, src),
        _sequential(raw, src),
        _novelty(raw, src),
        _context_recall(raw, src),
    )
    weights = _gain(raw, names, src)
    dedupe = raw.get("dedupe", "text")
    require(dedupe in ("id", "text"), "dedupe is 'id' or 'text'", src, "dedupe")
    engine = raw.get("engine", "auto")
    require(engine in ENGINES, f"engine is one of {', '.join(ENGINES)}", src, "engine")
    affected = raw.get("affected_by")
    if affected is not None:
        require(
            parse_metrics([affected])[0].name in names, "affected_by must be one of the metrics", src, "affected_by"
        )
    enc = EncoderSettings.from_config(raw.get("encoder"), src).options  # checked against Encoder's signature
    name = str(raw.get("name") or Path(source).stem)
    return IngestConfig(
        name=name,
        output=Path(output) if output is not None else Path(raw.get("output") or f"results/{name}"),
        dataset=ds,
        retriever=ret,
        metrics=list(metrics),
        candidates=cands,
        modes=list(dict.fromkeys(modes)),
        relevance_level=int(level),
        leave_one_out=loo,
        sequential=seq,
        novelty=nov,
        context_recall=cr,
        gain=weights,
        dedupe=dedupe,
        affected_by=affected,
        engine=engine,
        encoder=enc,
        seed=int(seed),
        source=source,
        raw=raw,
    )


def load_ingest_config(path: str | Path, output: str | Path | None = None) -> IngestConfig:
    """Read and validate an ingestion YAML file (errors name file:line and field)."""
    return load(path, parse_ingest_config, output)
