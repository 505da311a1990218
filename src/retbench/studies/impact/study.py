"""The ingestion-impact study runner: dataset, K and candidates, engine, modes, results directory."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retbench.chunkers import make_chunker
from retbench.config.impact import IngestModel
from retbench.data import Corpus, Dataset, Qrels, Queries
from retbench.errors import ConfigError, InputError
from retbench.io.files import write_json, write_text
from retbench.report.impact import render_report
from retbench.results.impact import STATUSES, GainWeights, Impact, ImpactResult, Novelty
from retbench.retrievers.base import Retriever, create
from retbench.retrievers.encoders import Encoder
from retbench.studies.dataset import dataset_manifest, prepare_dataset
from retbench.studies.executors import devices_of
from retbench.studies.impact.candidates import CandidateSet, build_candidates, candidate_status, reference_answers
from retbench.studies.impact.config import gain_weights
from retbench.studies.impact.dense import DenseImpact
from retbench.studies.impact.novelty import ChunkTable, NoveltyIndex, text_hash
from retbench.studies.impact.rebuild import RebuildImpact
from retbench.studies.impact.support import ContextRecall, CosineSupport, JudgeSupport, SentenceSupport
from retbench.studies.manifest import manifest_header
from retbench.studies.resources import rate, stage


@dataclass
class IngestOutcome:
    config: IngestModel
    result: ImpactResult

    @property
    def metrics(self) -> list[str]:
        return self.result.metrics

    @property
    def before(self) -> dict[str, float]:
        return self.result.before

    @property
    def results(self) -> dict[str, list[Impact]]:
        return self.result.results

    @property
    def summary(self) -> dict[str, Any]:
        return self.result.summary


def study_checks(impacts: Sequence[Impact], recall: str) -> dict[str, object]:
    """The SciFact study's 'done when' figures, computed (never asserted) from the alone impacts."""
    by = {g: [i for i in impacts if i.group == g] for g in dict.fromkeys(i.group for i in impacts)}
    out: dict[str, object] = {"groups": {g: len(v) for g, v in by.items()}}
    gold = by.get("gold", [])
    others = [i for i in impacts if i.group != "gold"]
    if gold:
        pos = [i for i in gold if i.own_deltas.get(recall, 0.0) > 0]
        best_other = max((i.gain for i in others), default=float("-inf"))
        out["gold"] = {
            "n": len(gold),
            "positive_own_delta_recall": len(pos),
            "zero_or_negative_own_delta_recall": [i.doc_id for i in gold if i not in pos],
            "mean_own_delta_recall": float(np.mean([i.own_deltas.get(recall, 0.0) for i in gold])),
            "ranked_above_every_other_candidate": sum(i.gain > best_other for i in gold),
            "all_gold_above_all_others": all(i.gain > best_other for i in gold),
            "min_gain": min(i.gain for i in gold),
            "max_other_gain": best_other,
        }
    for g in ("near_duplicate", "present"):
        v = by.get(g, [])
        if not v:
            continue
        nov = [i.novelty.min for i in v if i.novelty is not None]
        out[g] = {
            "n": len(v),
            "novelty_below_0.05": sum(x < 0.05 for x in nov),
            "max_novelty": max(nov) if nov else None,
            "mean_novelty": float(np.mean(nov)) if nov else None,
            "recall_unchanged": sum(i.deltas.get(recall, 0.0) == 0.0 for i in v),
            "recall_changed": [
                {"doc_id": i.doc_id, recall: i.deltas.get(recall, 0.0), "lost": i.lost}
                for i in v
                if i.deltas.get(recall, 0.0) != 0.0
            ],
            "results_changed_queries": sum(len(i.changed) for i in v),
        }
    return out


@dataclass
class _Setup:
    """What every mode works on: the evaluation queries, K, the candidates and their status against K."""

    ds: Dataset
    split: str
    qids: list[str]
    qrels: Qrels
    queries: Queries
    cs: CandidateSet
    status: list[str]
    dup_of: list[str | None]
    load_seconds: float = 0.0

    @property
    def kb(self) -> Corpus:
        return self.cs.kb

    @property
    def cands(self) -> Corpus:
        return self.cs.candidates


def _setup(cfg: IngestModel, base: Path | None) -> _Setup:
    """Load the dataset and its evaluation queries as every study does, build K and the candidates."""
    t0 = time.perf_counter()
    spec = cfg.dataset_spec
    ds, queries = prepare_dataset(spec)
    load_seconds = time.perf_counter() - t0
    split = spec.split
    qrels, qids = ds.split(split), list(queries)
    cs = build_candidates(
        ds.corpus, qrels, qids, cfg.candidates, relevance_level=cfg.relevance_level, seed=cfg.seed, base=base
    )
    status, dup_of = candidate_status(cs.kb, cs.candidates, cfg.dedupe)
    return _Setup(ds, split, qids, qrels, queries, cs, status, dup_of, load_seconds)


def _text_lookup(*corpora: Corpus) -> Callable[[str], str]:
    """A document's text from the first corpus that holds it (memoized)."""
    texts: dict[str, str] = {}

    def text_of(doc_id: str) -> str:
        if doc_id not in texts:
            for c in corpora:
                if doc_id in c:
                    texts[doc_id] = c.texts[c.index[doc_id]]
                    break
            else:
                raise InputError(f"no text for document {doc_id!r}")
        return texts[doc_id]

    return text_of


def _context(cfg: IngestModel, s: _Setup, encoder: Encoder, base: Path | None) -> ContextRecall | None:
    cr = cfg.context_recall
    if cr is None:
        return None
    refs = reference_answers(cr.references, s.ds, s.qrels, s.qids, cfg.relevance_level, base)
    support: SentenceSupport = (  # an LLM judges sentence support instead of the cosine
        JudgeSupport(cr.judge, cr.max_chars or 2000, cfg.output_dir / "judge_calls.jsonl")
        if cr.judge is not None
        else CosineSupport(encoder, float(cr.threshold))
    )
    return ContextRecall(refs, _text_lookup(s.cands, s.kb, s.ds.corpus), support, cr.context_k)


def _engine(
    cfg: IngestModel, s: _Setup, retriever: Retriever, encoder: Encoder, context: ContextRecall | None
) -> DenseImpact | RebuildImpact:
    """The exact incremental engine for a dense flat inner-product retriever, else the rebuild engine."""
    dense_flat = retriever.index_type == "flat_ip"
    use_incremental = cfg.engine == "incremental" or (cfg.engine == "auto" and dense_flat)
    if use_incremental and not dense_flat:
        raise ConfigError(
            "engine 'incremental' needs a dense retriever with index flat_ip", path=cfg.source, field="engine"
        )
    if not use_incremental:
        return RebuildImpact(
            retriever,
            s.kb,
            s.queries,
            s.qrels,
            cfg.metrics,
            relevance_level=cfg.relevance_level,
            context=context,
            affected_by=cfg.affected_by,
            strategy="reindex" if cfg.engine == "reindex" else "add",
        )
    retriever.index(s.kb)
    qv = encoder.encode_queries([s.queries[q] for q in s.qids])
    kv = encoder.encode_documents(s.kb.joined_texts())  # cached by index(): what lets identical vectors tie exactly
    return DenseImpact(
        s.kb.ids,
        s.qids,
        qv,
        s.qrels,
        cfg.metrics,
        search=retriever.search_embeddings,  # type: ignore[attr-defined]
        kb_vectors=kv,
        relevance_level=cfg.relevance_level,
        context=context,
        affected_by=cfg.affected_by,
    )


class _Modes:
    """Runs the configured modes over one engine and novelty index, filling in novelty, status and gain."""

    def __init__(
        self,
        cfg: IngestModel,
        s: _Setup,
        engine: DenseImpact | RebuildImpact,
        nov_index: NoveltyIndex,
        cand_vecs: np.ndarray | None,
    ) -> None:
        self.cfg, self.s, self.engine, self.nov_index, self.cand_vecs = cfg, s, engine, nov_index, cand_vecs
        self.gain = gain_weights(cfg)
        self.group_of = dict(zip([str(x) for x in s.cands.ids], s.cs.groups, strict=True))

    def finish(
        self, impacts: list[Impact], novelty: list[Novelty], st: Sequence[str], dups: Sequence[str | None]
    ) -> list[Impact]:
        for imp, nov, s, du in zip(impacts, novelty, st, dups, strict=True):
            imp.novelty, imp.status, imp.duplicate_of = nov, s, du
            imp.group = self.group_of.get(imp.doc_id, imp.group)
            self.gain.apply(imp)
        return impacts

    def alone(self, cand_chunks: tuple[ChunkTable, np.ndarray] | None) -> list[Impact]:
        s, engine = self.s, self.engine
        skip = [x != "new" for x in s.status]
        if isinstance(engine, DenseImpact):
            assert self.cand_vecs is not None  # encoded up front for the dense engine
            impacts = engine.alone(s.cands.ids, self.cand_vecs, skip)
        else:
            impacts = engine.alone(s.cands, skip)
        novelty = self.nov_index.novelty(s.cands, encoded=cand_chunks)
        self.finish(impacts, novelty, s.status, s.dup_of)
        return sorted(impacts, key=lambda i: (-i.gain, i.doc_id))

    def _loo_ids(self) -> list[str]:
        cfg, s, loo = self.cfg, self.s, self.cfg.leave_one_out
        assert loo is not None  # IngestModel requires the block with mode leave_one_out
        if loo.ids is not None:
            return [str(x) for x in loo.ids]
        if loo.group is not None:
            ids = [c for c, g in zip(s.cands.ids, s.cs.groups, strict=True) if g == loo.group and c in s.kb]
            if not ids:
                raise ConfigError(
                    f"no candidate of group {loo.group!r} is in the knowledge base",
                    path=cfg.source,
                    field="leave_one_out.group",
                )
            return ids
        seed = loo.seed if loo.seed is not None else cfg.seed
        return random.Random(seed).sample(list(s.kb.ids), min(int(loo.sample or 0), len(s.kb)))

    def leave_one_out(self) -> list[Impact]:
        loo_ids = self._loo_ids()
        impacts = self.engine.leave_one_out(loo_ids)
        novelty = self.nov_index.novelty(self.s.kb.subset(loo_ids), leave_one_out=True)
        for imp in impacts:
            self.group_of.setdefault(imp.doc_id, "in_kb")
        self.finish(impacts, novelty, ["present"] * len(loo_ids), [None] * len(loo_ids))
        return sorted(impacts, key=lambda i: (-i.gain, i.doc_id))

    def sequential(self, alone: list[Impact] | None) -> list[Impact]:
        s, cands = self.s, self.s.cands
        order = list(range(len(cands)))
        if self.cfg.sequential.order == "gain" and alone is not None:
            rank = {i.doc_id: n for n, i in enumerate(alone)}
            order.sort(key=lambda j: rank[str(cands.ids[j])])
        ordered = cands.subset([cands.ids[j] for j in order])
        st = [s.status[j] for j in order]
        du = [s.dup_of[j] for j in order]
        seq_skip = [x != "new" for x in st]
        seen: dict[str, str] = {}
        for j in range(len(ordered)):  # a text already ingested earlier in this sequence is a duplicate too
            h = text_hash(ordered.joined(j))
            if not seq_skip[j] and self.cfg.dedupe == "text" and h in seen:
                st[j], du[j], seq_skip[j] = "duplicate", seen[h], True
            elif not seq_skip[j]:
                seen[h] = str(ordered.ids[j])
        if isinstance(self.engine, DenseImpact):
            assert self.cand_vecs is not None
            impacts = self.engine.sequential(ordered.ids, self.cand_vecs[order], seq_skip)
        else:
            impacts = self.engine.sequential(ordered, seq_skip)
        novelty = self.nov_index.novelty(ordered, sequential=[not x for x in seq_skip])
        return self.finish(impacts, novelty, st, du)


def _summary(
    gain: GainWeights,
    s: _Setup,
    engine: DenseImpact | RebuildImpact,
    before: dict[str, float],
    results: Mapping[str, list[Impact]],
) -> dict[str, object]:
    summary: dict[str, object] = {
        "before": before,
        "evaluation_queries": engine.n,
        "skipped_no_relevant": engine.skipped,
        "knowledge_base_documents": len(s.kb),
        "candidates": len(s.cands),
        "status": {x: s.status.count(x) for x in STATUSES},
        "engine": engine.engine,
        "affected_by": engine.metric_names[engine.affected],
        "gain": asdict(gain),
        "modes": {m: len(v) for m, v in results.items()},
    }
    if "alone" in results:
        summary["study"] = study_checks(results["alone"], gain.recall)
    if results.get("sequential"):
        summary["after_sequential"] = results["sequential"][-1].after
    return summary


def _manifest(
    cfg: IngestModel,
    s: _Setup,
    parts: Mapping[str, Any],
    engine: DenseImpact | RebuildImpact,
    context: ContextRecall | None,
    timings: dict[str, float],
) -> dict[str, object]:
    """What ran, on what, with which versions: `parts` holds the retriever, encoder and novelty index."""
    return {
        **manifest_header(cfg, name=cfg.study_name, kind="ingest-impact"),
        "dataset": dataset_manifest(s.ds, cfg.dataset_spec, s.queries, s.load_seconds),
        "knowledge_base": {"documents": len(s.kb), "fingerprint": s.kb.fingerprint()},
        "candidates": {"documents": len(s.cands), "fingerprint": s.cands.fingerprint(), **s.cs.info},
        "retriever": parts["retriever"].describe(),
        "engine": engine.engine,
        "encoder": parts["encoder"].describe(),
        "novelty": parts["novelty"].describe(),
        "context_recall": None
        if context is None
        else {
            **context.judge.describe(),
            "context_k": context.context_k,
            "references": cfg.context_recall.references if cfg.context_recall else None,
            "queries_with_references": int(engine.has_ref.sum()),
        },
        "metrics": engine.metric_names,
        "depth": engine.depth,
        "timings": timings,
    }


def _write(
    out: Path, manifest: dict[str, object], summary: dict[str, object], results: dict[str, list[Impact]]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "manifest.json", manifest)
    write_json(out / "summary.json", summary)
    for mode, impacts in results.items():
        name = "candidates.json" if mode == "alone" else f"{mode}.json"
        write_json(out / name, [i.to_dict() for i in impacts])


def _run_modes(
    cfg: IngestModel,
    modes: _Modes,
    cand_chunks: tuple[ChunkTable, np.ndarray] | None,
    timings: dict[str, float],
    log: Callable[[str], None],
) -> dict[str, list[Impact]]:
    results: dict[str, list[Impact]] = {}
    runs = (
        ("alone", lambda: modes.alone(cand_chunks), "candidates"),
        ("leave_one_out", modes.leave_one_out, "documents"),
        ("sequential", lambda: modes.sequential(results.get("alone")), "candidates"),
    )
    for mode, run, unit in runs:
        if mode not in cfg.modes:
            continue
        t0 = time.perf_counter()
        results[mode] = run()
        timings[f"{mode}_seconds"] = time.perf_counter() - t0
        log(f"{mode.replace('_', '-')}: {len(results[mode])} {unit} in {timings[f'{mode}_seconds']:.2f}s")
    return results


def run_ingest(cfg: IngestModel, *, log: Callable[[str], None] = print) -> IngestOutcome:
    """Run an ingestion-impact experiment and write its results directory (manifest, JSON, report.md)."""
    timings: dict[str, float] = {}
    res: dict[str, Any] = {}  # resource figures: peak RSS and seconds per stage, throughput, devices
    t_all = time.perf_counter()
    base = Path(cfg.source).parent if cfg.source and not cfg.source.startswith("<") else None
    with stage(res, "prepare"):
        s = _setup(cfg, base)
    groups = s.cs.groups
    log(
        f"knowledge base: {len(s.kb)} documents; candidates: {len(s.cands)} "
        f"({', '.join(f'{g}: {groups.count(g)}' for g in dict.fromkeys(groups))})"
    )
    system = cfg.retriever
    retriever = create(system.adapter, system.params or {}, name=system.name, where=cfg.source)
    encoder = retriever.encoder or Encoder(**cfg.encoder.options)
    chunker = make_chunker(cfg.novelty.chunker, where=cfg.source) if cfg.novelty.chunker else None
    context = _context(cfg, s, encoder, base)
    try:  # a judged context recall may have started a local judge server
        with stage(res, "index"):
            engine = _engine(cfg, s, retriever, encoder, context)
        with stage(res, "novelty_index"):
            nov_index = NoveltyIndex(encoder, chunker)
            nov_index.add(s.kb)
            cand_chunks = nov_index.encode(s.cands)
            incremental = isinstance(engine, DenseImpact)
            cand_vecs = encoder.encode_documents(s.cands.joined_texts()) if incremental else None
        timings.update({k: v for k, v in res.items() if k.endswith("_seconds")})
        before = engine.before
        log("with K: " + ", ".join(f"{m} {v:.4f}" for m, v in before.items()))
        with stage(res, "modes"):
            modes = _Modes(cfg, s, engine, nov_index, cand_vecs)
            results = _run_modes(cfg, modes, cand_chunks, timings, log)
    finally:
        if context is not None:
            context.close()
    res.pop("modes_seconds")  # each mode's own seconds are in timings
    res["index_docs_per_s"] = rate(len(s.kb), res["index_seconds"])
    res["devices"] = devices_of(retriever, encoder.device)
    if isinstance(engine, RebuildImpact):
        timings.update({f"rebuild_{k}_seconds": v for k, v in engine.seconds.items()})
    retriever.close()
    timings["total_seconds"] = time.perf_counter() - t_all
    timings = {k: round(v, 3) for k, v in timings.items()}
    summary = _summary(modes.gain, s, engine, before, results)
    parts = {"retriever": retriever, "encoder": encoder, "novelty": nov_index}
    manifest = {**_manifest(cfg, s, parts, engine, context, timings), "resources": res}
    out = cfg.output_dir
    _write(out, manifest, summary, results)
    result = ImpactResult(
        cfg.study_name,
        engine.metric_names,
        before,
        results,
        summary,
        manifest,
        modes.gain,
        cfg.sequential.order,
        out,
    )
    write_text(out / "report.md", render_report(result))
    return IngestOutcome(cfg, result)
