"""`retbench chunking CONFIG`: chunkers x retrievers on a chunking set, judged by character spans.

    name: chunking
    output: results/chunking
    dataset: chunking_eval            # shipped name or a folder in the chunking-set layout
    depth: 50                         # chunks retrieved per question
    metrics: [recall@1, recall@5, recall@10, mrr@10, ndcg@10, P@5]
    token_k: [5, 10]                  # character-level precision / recall / IoU of the top k
    budgets: [512]                    # fixed context budgets in tokens
    tokenizer: all-MiniLM-L6-v2       # counts tokens per chunk and budgets (the embedding model's)
    max_seq_length: 256               # the model's limit, special tokens included
    relevance: {min_chars: 1, min_fraction: 0.0}
    chunkers:
      - {name: recursive_200t, kind: recursive, size: 200, unit: tokens}
    systems:
      - {name: bm25, adapter: bm25s, params: {stopwords: en, stemmer: english}}

Every (chunker, system) pair is a "system" of the results directory named `<chunker>+<system>`,
laid out as for `retbench run` (run.trec, status.jsonl, per_query.tsv, aggregates.json, done.json)
plus `chunks.json` per chunker; `metrics.json` holds each pair's means, chunk statistics and
timings, `manifest.json` the config, versions and fingerprints, and `report.md` the two tables
(all chunks, and every retriever at a fixed context budget). A finished pair with the same
config hash is skipped on a re-run unless forced.

One retriever object per system is re-indexed for every chunker (`index` builds from scratch), so
a dense model loads once and the questions are encoded once: the embedding cache answers them for
every later chunker, and re-runs encode nothing at all.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retbench.chunkers import Chunker, ChunkSet, HFTokenizer, make_chunker, make_tokenizer
from retbench.errors import ConfigError
from retbench.evaluation import Evaluation
from retbench.io.chunking_eval import read_chunking_eval
from retbench.io.datasets import resolve
from retbench.io.files import read_yaml
from retbench.metrics.judges import budget_cutoffs, evaluate_judgement, judge_spans, overlap_scores
from retbench.metrics.judges.spans import budget_label
from retbench.metrics.registry import parse_metric
from retbench.report.chunking import render_markdown
from retbench.results import SystemDir, save_run, write_json
from retbench.retrievers.base import create, resolve_factory
from retbench.studies.manifest import config_record, machine, package_versions

TOP_KEYS = {
    "name",
    "output",
    "dataset",
    "max_queries",
    "depth",
    "metrics",
    "token_k",
    "budgets",
    "tokenizer",
    "max_seq_length",
    "relevance",
    "chunkers",
    "systems",
    "batch_size",
    "description",
}
DEFAULT_METRICS = ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "P@5"]
SEPARATOR = "+"


@dataclass
class ChunkingConfig:
    name: str
    output: Path
    dataset: str
    chunkers: list[dict[str, Any]]
    systems: list[dict[str, Any]]
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    token_k: list[int] = field(default_factory=lambda: [5, 10])
    budgets: list[int] = field(default_factory=lambda: [512])
    depth: int = 50
    max_queries: int | None = None
    tokenizer: str = "all-MiniLM-L6-v2"
    max_seq_length: int = 256
    min_chars: int = 1
    min_fraction: float = 0.0
    batch_size: int = 64
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    def pair_hash(self, chunker: dict[str, Any], system: dict[str, Any]) -> str:
        """What one pair's results depend on: resume reuses only results with the same hash."""
        blob = {
            "chunker": chunker,
            "system": system,
            "dataset": self.dataset,
            "max_queries": self.max_queries,
            "depth": self.depth,
            "metrics": self.metrics,
            "token_k": self.token_k,
            "budgets": self.budgets,
            "tokenizer": self.tokenizer,
            "max_seq_length": self.max_seq_length,
            "relevance": [self.min_chars, self.min_fraction],
        }
        return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _positive_ints(value: Any, source: str, fld: str) -> list[int]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise ConfigError("must be a non-empty list of positive integers", path=source, field=fld)
    return list(value)


def _named_blocks(raw: Any, key: str, source: str, need: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"list at least one entry with '{need}'", path=source, field=key)
    out, seen = [], set()
    for i, block in enumerate(raw):
        if not isinstance(block, dict) or not isinstance(block.get(need), str):
            raise ConfigError(f"each entry is a mapping with '{need}'", path=source, field=f"{key}[{i}]")
        name = str(block.get("name") or block[need])
        if name in seen:
            raise ConfigError(f"duplicate name {name!r}", path=source, field=f"{key}[{i}].name")
        if "/" in name or SEPARATOR in name or name in (".", ".."):
            raise ConfigError(f"a name cannot contain '/' or '{SEPARATOR}'", path=source, field=f"{key}[{i}].name")
        seen.add(name)
        out.append({**block, "name": name})
    return out


def parse_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> ChunkingConfig:
    """Validate a chunking experiment; every error names the field. Chunkers and adapters are checked here."""
    if not isinstance(raw, dict):
        raise ConfigError("a chunking config must be a mapping", path=source)
    extra = sorted(set(raw) - TOP_KEYS)
    if extra:
        raise ConfigError(
            f"unknown key {extra[0]!r}; allowed: {', '.join(sorted(TOP_KEYS))}", path=source, field=extra[0]
        )
    dataset = raw.get("dataset", "chunking_eval")
    if not isinstance(dataset, str) or not dataset:
        raise ConfigError("give a chunking set name or folder", path=source, field="dataset")
    chunkers = _named_blocks(raw.get("chunkers"), "chunkers", source, "kind")
    systems = _named_blocks(raw.get("systems"), "systems", source, "adapter")
    tokenizer = str(raw.get("tokenizer", "all-MiniLM-L6-v2"))
    for i, block in enumerate(chunkers):
        try:
            make_chunker({k: v for k, v in block.items()} | {"tokenizer": block.get("tokenizer", tokenizer)})
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=source, field=f"chunkers[{i}].{exc.field or 'kind'}") from None
    for i, s in enumerate(systems):
        extra = sorted(set(s) - {"name", "adapter", "params"})
        if extra:
            raise ConfigError(
                f"unknown key {extra[0]!r}; allowed: adapter, name, params",
                path=source,
                field=f"systems[{i}].{extra[0]}",
            )
        if not isinstance(s.get("params", {}) or {}, dict):
            raise ConfigError("params must be a mapping", path=source, field=f"systems[{i}].params")

        try:
            resolve_factory(s["adapter"])
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=source, field=f"systems[{i}].adapter") from None
    metrics = raw.get("metrics", DEFAULT_METRICS)
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise ConfigError("metrics must be a list of names", path=source, field="metrics")

    for i, m in enumerate(metrics):
        try:
            parse_metric(m)
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=source, field=f"metrics[{i}]") from None
    rel = raw.get("relevance") or {}
    if not isinstance(rel, dict) or set(rel) - {"min_chars", "min_fraction"}:
        raise ConfigError("relevance takes min_chars and min_fraction", path=source, field="relevance")
    min_chars, min_fraction = rel.get("min_chars", 1), rel.get("min_fraction", 0.0)
    if not isinstance(min_chars, int) or min_chars < 1:
        raise ConfigError("must be an integer >= 1", path=source, field="relevance.min_chars")
    if not isinstance(min_fraction, (int, float)) or not 0.0 <= min_fraction <= 1.0:
        raise ConfigError("must be a number in [0, 1]", path=source, field="relevance.min_fraction")
    scalars = {}
    for key, default in (("depth", 50), ("max_seq_length", 256), ("batch_size", 64)):
        v = raw.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError("must be a positive integer", path=source, field=key)
        scalars[key] = v
    max_queries = raw.get("max_queries")
    if max_queries is not None and (not isinstance(max_queries, int) or max_queries < 1):
        raise ConfigError("must be a positive integer", path=source, field="max_queries")
    name = str(raw.get("name") or Path(source).stem)
    return ChunkingConfig(
        name=name,
        output=Path(output) if output is not None else Path(raw.get("output") or f"results/{name}"),
        dataset=dataset,
        chunkers=chunkers,
        systems=systems,
        metrics=list(metrics),
        token_k=_positive_ints(raw.get("token_k", [5, 10]), source, "token_k"),
        budgets=_positive_ints(raw.get("budgets", [512]), source, "budgets"),
        max_queries=max_queries,
        tokenizer=tokenizer,
        min_chars=min_chars,
        min_fraction=float(min_fraction),
        source=source,
        raw=raw,
        **scalars,
    )


def load_config(path: str | Path, output: str | Path | None = None) -> ChunkingConfig:

    return parse_config(read_yaml(path), str(path), output)


# -- one (chunker, system) pair ------------------------------------------------------------------------
def pair_columns(cfg: ChunkingConfig) -> list[str]:
    """Per-query columns besides the metrics: character-level scores at each k and the budget view."""
    cols = [f"token_{m}@{k}" for k in cfg.token_k for m in ("precision", "recall", "iou")]
    for b in cfg.budgets:
        cols += [
            f"{m}{budget_label(b)}" for m in ("chunks", "recall", "mrr", "token_precision", "token_recall", "token_iou")
        ]
    return cols


def score_pair(run: Any, chunks: ChunkSet, spans: dict, cfg: ChunkingConfig, system: str) -> Any:
    """Judge a chunk run by spans: the config's metrics, character-level P/R/IoU and the budget view."""

    judgement = judge_spans(run, chunks, spans, min_chars=cfg.min_chars, min_fraction=cfg.min_fraction)
    ev = evaluate_judgement(judgement, run, cfg.metrics, system=system)
    rows = (
        np.asarray([judgement.query_ids.index(q) for q in ev.query_ids], dtype=np.int64)
        if ev.query_ids
        else np.zeros(0, np.int64)
    )
    extra: list[np.ndarray] = []
    for k in cfg.token_k:
        s = overlap_scores(run, chunks, spans, k)
        extra += [s["precision"], s["recall"], s["iou"]]
    for b in cfg.budgets:
        cut = budget_cutoffs(run, chunks, judgement.query_ids, b)
        s = overlap_scores(run, chunks, spans, cut)
        extra += [
            cut.astype(np.float64),
            judgement.recall(cut),
            judgement.mrr(cut),
            s["precision"],
            s["recall"],
            s["iou"],
        ]
    values = np.column_stack([ev.values, *(x[rows] for x in extra)]) if extra else ev.values
    return Evaluation(
        system=system,
        metrics=[*ev.metrics, *pair_columns(cfg)],
        query_ids=ev.query_ids,
        values=values,
        status=ev.status,
        skipped=ev.skipped,
        n_duplicates=ev.n_duplicates,
        unjudged=ev.unjudged,
    )


def _encoder_of(retriever: Any) -> Any:
    """The Encoder of a dense retriever (or of a hybrid's dense component), if it has one."""
    enc = getattr(retriever, "encoder", None)
    if enc is not None:
        return enc
    for c in getattr(retriever, "components", []) or []:
        enc = _encoder_of(c)
        if enc is not None:
            return enc
    return None


@dataclass
class PairOutcome:
    """What happened to one (chunker, system) pair; `name` is its results-directory key."""

    name: str
    chunker: str
    system: str
    skipped: bool = False
    failed_queries: int = 0
    index_error: str | None = None


@dataclass
class ChunkingOutcome:
    """Shaped like `experiment.ExperimentOutcome` so `raise_if_backend_failed` serves both."""

    config: ChunkingConfig
    systems: list[PairOutcome]
    metrics: dict[str, Any]

    @property
    def backend_failed(self) -> bool:
        return any(p.failed_queries or p.index_error for p in self.systems)


Progress = Callable[[str], None]


def run_chunking(cfg: ChunkingConfig, *, force: bool = False, log: Progress = print) -> ChunkingOutcome:
    """Chunk, index, search and judge every (chunker, system) pair; write the results directory."""

    out = cfg.output
    out.mkdir(parents=True, exist_ok=True)
    ev = read_chunking_eval(resolve(cfg.dataset))
    qids = ev.queries.ids[: cfg.max_queries] if cfg.max_queries else ev.queries.ids
    queries = ev.queries.subset(qids)
    spans = {q: ev.spans[q] for q in qids}
    tokenizer = make_tokenizer(cfg.tokenizer)
    special = tokenizer.n_special if isinstance(tokenizer, HFTokenizer) else 0
    max_content = cfg.max_seq_length - special
    manifest: dict[str, Any] = {
        "experiment": cfg.name,
        "kind": "chunking",
        "config": config_record(cfg.source, cfg.raw),
        "config_file": cfg.source,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": package_versions(),
        "machine": machine(),
        "datasets": [
            {
                "name": ev.name,
                "path": ev.path,
                "documents": len(ev.corpus),
                "queries": len(queries),
                "gold_spans": sum(len(s) for s in spans.values()),
                "corpus_fingerprint": ev.corpus.fingerprint(),
            }
        ],
        "relevance": {"judge": "spans", "min_chars": cfg.min_chars, "min_fraction": cfg.min_fraction},
        "tokenizer": tokenizer.name,
        "max_seq_length": cfg.max_seq_length,
        "special_tokens": special,
        "chunkers": {},
        "systems": {},
    }
    metrics_json: dict[str, Any] = {}
    pairs: list[PairOutcome] = []
    retrievers: dict[str, Any] = {}
    try:
        for cblock in cfg.chunkers:
            chunker: Chunker = make_chunker(
                {k: v for k, v in cblock.items()} | {"tokenizer": cblock.get("tokenizer", tokenizer)}
            )
            t0 = time.perf_counter()
            chunks = chunker.chunk_corpus(ev.corpus)
            chunk_seconds = round(time.perf_counter() - t0, 3)
            stats = chunks.stats(max_tokens=max_content)
            stats["chunk_seconds"] = chunk_seconds
            manifest["chunkers"][chunker.name] = {"describe": chunker.describe(), "stats": stats}
            write_json(
                out / "chunkers" / f"{chunker.name}.json",
                {"describe": chunker.describe(), "stats": stats, "docs_without_chunks": chunks.docs_without_chunks()},
            )
            log(
                f"{chunker.name}: {stats['n_chunks']} chunks in {chunk_seconds}s "
                f"(tokens mean {stats.get('tokens_mean', 0):.0f}, over {max_content}: {stats.get('chunks_over_max', 0)})"
            )
            corpus = chunks.to_corpus(name=f"{ev.name}/{chunker.name}")
            for sblock in cfg.systems:
                key = f"{chunker.name}{SEPARATOR}{sblock['name']}"
                pairs.append(
                    _run_pair(
                        key,
                        chunker.name,
                        cblock,
                        sblock,
                        chunks,
                        corpus,
                        queries,
                        spans,
                        stats,
                        cfg,
                        retrievers,
                        metrics_json,
                        manifest,
                        force,
                        log,
                        create,
                    )
                )
    finally:
        for r in retrievers.values():
            r.close()
    write_json(out / "metrics.json", metrics_json)
    write_json(out / "manifest.json", manifest)
    (out / "report.md").write_text(render_markdown(cfg, metrics_json, manifest))
    return ChunkingOutcome(cfg, pairs, metrics_json)


def _run_pair(
    key: str,
    chunker_name: str,
    cblock: dict,
    sblock: dict,
    chunks: ChunkSet,
    corpus: Any,
    queries: Any,
    spans: dict,
    stats: dict,
    cfg: ChunkingConfig,
    retrievers: dict,
    metrics_json: dict,
    manifest: dict,
    force: bool,
    log: Progress,
    create: Callable[..., Any],
) -> PairOutcome:
    outcome = PairOutcome(key, chunker_name, sblock["name"])
    sysdir = SystemDir(cfg.output / "systems" / key)
    chash = cfg.pair_hash(cblock, sblock)
    if sysdir.is_done(chash) and not force:
        done = json.loads(sysdir.done.read_text())
        outcome.skipped, outcome.failed_queries = True, done.get("failed_queries", 0)
        metrics_json[key], manifest["systems"][key] = done["metrics"], done["manifest"]
        log(f"{key}: finished earlier, skipped (use --force to redo)")
        return outcome
    sysdir.root.mkdir(parents=True, exist_ok=True)
    sysdir.done.unlink(missing_ok=True)
    name = sblock["name"]
    if name not in retrievers:
        retrievers[name] = create(sblock["adapter"], sblock.get("params") or {}, name=name, where=cfg.source)
    retriever = retrievers[name]
    encoder = _encoder_of(retriever)
    before = (
        (encoder.stats.by_role["document"]["encoded"], encoder.stats.by_role["query"]["encoded"]) if encoder else (0, 0)
    )
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        retriever.index(corpus)
    except Exception as exc:  # a backend failure is recorded, the other pairs still run
        outcome.index_error = f"{type(exc).__name__}: {exc}"
        metrics_json[key] = {"error": outcome.index_error, "chunker": chunker_name, "system": name}
        log(f"{key}: backend failed while indexing: {outcome.index_error}")
        return outcome
    timings["index_seconds"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    run = retriever.search(queries, cfg.depth, batch_size=cfg.batch_size)
    timings["search_seconds"] = round(time.perf_counter() - t0, 3)
    outcome.failed_queries = len(run.failed())
    save_run(run, sysdir)
    t0 = time.perf_counter()
    evaluation = score_pair(run, chunks, spans, cfg, key)
    evaluation.to_tsv(sysdir.per_query)
    aggregates = evaluation.aggregate()
    write_json(sysdir.aggregates, aggregates)
    timings["evaluate_seconds"] = round(time.perf_counter() - t0, 3)
    encode: dict[str, Any] = {}
    if encoder is not None:
        # the index time of a dense system is its encode time; the counts say how much came from the cache
        encode = {
            "encode_seconds": timings["index_seconds"],
            "chunks_encoded": encoder.stats.by_role["document"]["encoded"] - before[0],
            "queries_encoded": encoder.stats.by_role["query"]["encoded"] - before[1],
        }
    judged = len(evaluation.query_ids)
    missing = sum(1 for s in evaluation.status if s == "missing")
    summary: dict[str, Any] = {"chunker": chunker_name, "system": name}
    summary.update({m: aggregates[m]["mean"] for m in evaluation.metrics})
    summary["chunks"] = {k: v for k, v in stats.items() if k != "chunk_seconds"}
    summary["timings"] = {"chunk_seconds": stats["chunk_seconds"], **timings, **encode}
    summary["coverage"] = {
        "answered": judged - outcome.failed_queries - missing,
        "judged": judged,
        "failed": outcome.failed_queries,
        "missing": missing,
        "skipped_no_relevant": len(evaluation.skipped),
        "mode": evaluation.mode,
    }
    sys_manifest = {
        "chunker": cblock,
        "adapter": sblock["adapter"],
        "describe": retriever.describe(),
        "fingerprint": retriever.fingerprint(),
        "timings": summary["timings"],
        "config_hash": chash,
    }
    metrics_json[key], manifest["systems"][key] = summary, sys_manifest
    write_json(
        sysdir.done,
        {"config_hash": chash, "metrics": summary, "manifest": sys_manifest, "failed_queries": outcome.failed_queries},
    )
    log(
        f"{key}: "
        + ", ".join(f"{m} {summary[m]:.3f}" for m in cfg.metrics[:4])
        + f" ({timings['index_seconds']}s index)"
    )
    return outcome
