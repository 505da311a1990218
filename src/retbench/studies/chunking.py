"""`retbench chunking CONFIG`: chunkers x retrievers on a chunking set (judged by character spans) or a BEIR corpus.

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

On a BEIR corpus (`dataset:` a mapping, the experiment's dataset block: `{name: scifact, split: test,
max_queries: 50, corpus_sample: 1000}`) relevance is the qrels' grade of a chunk's document. Each
document's title and text are joined by the dataset's join rule (as `retbench run` indexes them)
and then chunked; a document's rank is its best chunk's (the chunk ranking collapsed to distinct
documents, first occurrence kept), and the metrics are the normal trec_eval-exact `evaluate` of
that document run against the qrels, so nDCG, recall and MAP mean what they mean on BEIR. The
system searches deeper until it has `depth` distinct documents: it asks for `depth` chunks, and
for the queries whose collapsed ranking is still short it asks again with twice as many (up to
every chunk). A query that stays short (the retriever has nothing more to return) is kept short,
and counted in the coverage's `returned < depth` column of every report. The span-only options
(`token_k`, `budgets`, `relevance`, top-level `max_queries`) are refused there with a config error.

One retriever object per system is re-indexed for every chunker (`index` builds from scratch), so
a dense model loads once and the questions are encoded once: the embedding cache answers them for
every later chunker, and re-runs encode nothing at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retbench.chunkers import Chunker, ChunkSet, HFTokenizer, Tokenizer, make_chunker, make_tokenizer
from retbench.config import sample_ids
from retbench.config.chunking import SEPARATOR, ChunkingModel
from retbench.config.experiment import ScopedSystem
from retbench.config.study import load_study, parse_study
from retbench.data import Corpus, Qrels, Queries, Run
from retbench.data.samples import groups_from_samples
from retbench.errors import ConfigError
from retbench.evaluation import Evaluation, evaluate
from retbench.io.chunking_eval import read_chunking_eval
from retbench.io.datasets import resolve
from retbench.io.files import write_json, write_text
from retbench.metrics.judges import budget_cutoffs, judge_spans, overlap_scores
from retbench.metrics.judges.spans import budget_label
from retbench.metrics.settings import EvalSettings
from retbench.report import fmt
from retbench.report.chunking import render_html, render_markdown
from retbench.results import SystemDir
from retbench.results.layout import OutputLock
from retbench.results.model import StudyManifest, StudyResult
from retbench.results.write import write_results
from retbench.retrievers.base import Retriever, check_system, create
from retbench.retrievers.scope import with_scope
from retbench.studies.cell import LazyRetriever, run_cell
from retbench.studies.cell_contract import Cell, CellData, CellStages, Scored, fingerprint
from retbench.studies.chunk_documents import BestChunkDocuments, encoder_of, joined_corpus
from retbench.studies.dataset import doc_type_groups, load_prepared, require_relevant
from retbench.studies.manifest import manifest_header
from retbench.studies.outcome import Outcome, StudyOutcome

Scopes = Mapping[str, Callable[[str], bool]]  # query id -> is this chunk inside its chosen scope?


def search_fingerprint(cfg: ChunkingModel, chunker: Mapping[str, object], system: ScopedSystem) -> str:
    """What one pair's ranked lists depend on (its journal must match): chunks, system, questions, depth."""
    what: dict[str, object] = {
        "chunker": dict(chunker),
        "tokenizer": cfg.tokenizer,
        "system": system.identity(),
        "dataset": cfg.dataset_label,
        "max_queries": cfg.max_queries,
        "seed": cfg.seed,
        "depth": cfg.depth,
    }
    if (documents := cfg.documents) is not None:
        what["documents"] = dict(vars(documents))
    return fingerprint(what)


def pair_hash(cfg: ChunkingModel, chunker: Mapping[str, object], system: ScopedSystem) -> str:
    """What one pair's numbers depend on: resume reuses only results with the same hash."""
    settings = cfg.settings
    return fingerprint(
        {
            "search": search_fingerprint(cfg, chunker, system),
            "metrics": list(cfg.metrics),
            "token_k": cfg.span_token_k,
            "budgets": cfg.span_budgets,
            "max_seq_length": cfg.max_seq_length,
            "relevance": [cfg.relevance.min_chars, float(cfg.relevance.min_fraction)],
            # left out at the defaults, so results written before the block existed stay finished
            **({"evaluation": settings.to_dict()} if settings != EvalSettings() else {}),
        }
    )


def check_chunking(model: ChunkingModel) -> None:
    """The adapters against their factories, before any work (the model builds each chunker itself)."""
    for i, s in enumerate(model.systems):
        check_system(s.adapter, s.params, model.source, f"systems[{i}]")


def parse_config(data: object, source: str = "<config>", output: str | Path | None = None) -> ChunkingModel:
    """Validate a chunking experiment (`config.ChunkingModel`); chunkers and adapters are checked here too."""
    return parse_study(data, source, ChunkingModel, output, check_chunking)


def load_config(path: str | Path, output: str | Path | None = None) -> ChunkingModel:
    """Read and validate a chunking YAML file (errors name file:line and field)."""
    return load_study(path, ChunkingModel, output, check_chunking)


# -- one (chunker, system) pair ------------------------------------------------------------------------
def pair_columns(cfg: ChunkingModel) -> list[str]:
    """Per-query columns besides the metrics: character-level scores at each k and the budget view."""
    cols = [f"token_{m}@{k}" for k in cfg.span_token_k for m in ("precision", "recall", "iou")]
    for b in cfg.span_budgets:
        cols += [
            f"{m}{budget_label(b)}" for m in ("chunks", "recall", "mrr", "token_precision", "token_recall", "token_iou")
        ]
    return cols


def score_pair(
    run: Run, chunks: ChunkSet, spans: dict, cfg: ChunkingModel, system: str, scopes: Scopes | None = None
) -> Evaluation:
    """Judge a chunk run by spans: the config's metrics, character-level P/R/IoU and the budget view (`scopes`:
    a scoped system's query id -> "is this chunk inside the scope chosen?", for scope_miss_rate)."""

    judgement = judge_spans(
        run, chunks, spans, min_chars=cfg.relevance.min_chars, min_fraction=float(cfg.relevance.min_fraction)
    )
    ev = evaluate(run, judgement, cfg.metrics, cfg.settings, system=system, scopes=scopes)
    rows = (
        np.asarray([judgement.query_ids.index(q) for q in ev.query_ids], dtype=np.int64)
        if ev.query_ids
        else np.zeros(0, np.int64)
    )
    extra: list[np.ndarray] = []
    for k in cfg.span_token_k:
        s = overlap_scores(run, chunks, spans, k)
        extra += [s["precision"], s["recall"], s["iou"]]
    for b in cfg.span_budgets:
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


Progress = Callable[[str], None]


@dataclass
class StudyData:
    """What the pairs run on: the documents to chunk, the questions, and their relevance (spans or qrels)."""

    name: str
    corpus: Corpus
    queries: Queries
    spans: dict[str, Any]
    qrels: Qrels | None
    dataset: dict[str, Any]  # the manifest's dataset entry
    relevance: dict[str, Any]  # the manifest's relevance entry
    # group -> query ids the breakdown by group reads (tags, categories, answerable, doc_type:<type>), as in `run`
    groups: dict[str, list[str]] = field(default_factory=dict)


def _study_data(cfg: ChunkingModel) -> StudyData:
    """The chunking set (spans) or the BEIR dataset (qrels, through the dataset step every study shares)."""
    if (documents := cfg.documents) is not None:
        data = load_prepared(documents)
        require_relevant(data.qrels, cfg.settings, data.dataset.path, documents.split)
        return StudyData(
            data.dataset.name,
            joined_corpus(data.dataset.corpus),
            data.queries,
            {},
            data.qrels,
            data.manifest(),
            {"judge": "documents", "rank": "best chunk", "evaluation": cfg.settings.to_dict()},
            {
                **(groups_from_samples(data.dataset.samples) if data.dataset.samples else {}),
                **doc_type_groups(data.qrels, data.dataset.corpus),
            },
        )
    name = cfg.dataset_label  # a chunking set's name or folder
    folder = Path(resolve(name))
    if not (folder / "questions.jsonl").is_file() and any(folder.glob("corpus.jsonl*")):
        raise ConfigError(
            f"{name!r} is a BEIR dataset, not a chunking set (no questions.jsonl); to judge its chunks by "
            f"its qrels write the dataset block, e.g. dataset: {{name: {name}, split: test}}",
            path=cfg.source,
            field="dataset",
        )
    ev = read_chunking_eval(folder)
    qids = sample_ids(ev.queries.ids, cfg.max_queries, cfg.seed)
    queries = ev.queries.subset(qids)
    spans = {q: ev.spans[q] for q in qids}
    entry = {
        "name": ev.name,
        "path": ev.path,
        "documents": len(ev.corpus),
        "queries": len(queries),
        "max_queries": cfg.max_queries,
        "seed": cfg.seed,
        "gold_spans": sum(len(s) for s in spans.values()),
        "corpus_fingerprint": ev.corpus.fingerprint(),
    }
    relevance = {
        "judge": "spans",
        "min_chars": cfg.relevance.min_chars,
        "min_fraction": float(cfg.relevance.min_fraction),
    }
    gold = Qrels({q: {str(queries.metadata[q]["corpus_id"]): 1} for q in qids if q in queries.metadata})
    return StudyData(ev.name, ev.corpus, queries, spans, None, entry, relevance, doc_type_groups(gold, ev.corpus))


def _chunking_manifest(cfg: ChunkingModel, data: StudyData, tokenizer: Tokenizer) -> dict[str, Any]:
    special = tokenizer.n_special if isinstance(tokenizer, HFTokenizer) else 0
    return {
        **manifest_header(cfg, name=cfg.study_name, kind="chunking"),
        "datasets": [data.dataset],
        "relevance": data.relevance,
        "tokenizer": tokenizer.name,
        "max_seq_length": cfg.max_seq_length,
        "special_tokens": special,
        "chunkers": {},
        "systems": {},
    }


def run_chunking(cfg: ChunkingModel, *, force: bool = False, log: Progress = print) -> StudyOutcome:
    """Chunk, index, search and judge every (chunker, system) pair; write the results directory."""
    with OutputLock(cfg.output_dir):
        return _run_locked(cfg, force, log)


def _run_locked(cfg: ChunkingModel, force: bool, log: Progress) -> StudyOutcome:

    out = cfg.output_dir
    data = _study_data(cfg)
    tokenizer = make_tokenizer(cfg.tokenizer)
    manifest = _chunking_manifest(cfg, data, tokenizer)
    max_content = cfg.max_seq_length - manifest["special_tokens"]
    result = StudyResult(StudyManifest(manifest), {}, out)
    pairs: list[Outcome] = []
    retrievers: dict[str, LazyRetriever] = {}
    try:
        for cblock in cfg.chunker_params:
            chunker: Chunker = make_chunker(
                {k: v for k, v in cblock.items()} | {"tokenizer": cblock.get("tokenizer", tokenizer)}
            )
            chunks, stats = _chunk(chunker, data.corpus, out, max_content, manifest, log)
            corpus = chunks.to_corpus(name=f"{data.name}/{chunker.name}", documents=data.corpus)
            for sspec in cfg.systems:
                if sspec.label not in retrievers:
                    retrievers[sspec.label] = _lazy(sspec, cfg.source)
                outcome = _run_pair(
                    cfg,
                    chunker.name,
                    cblock,
                    sspec,
                    retrievers[sspec.label],
                    chunks,
                    corpus,
                    data,
                    stats,
                    force,
                    log,
                )
                pairs.append(outcome)
                result.systems[outcome.name] = outcome.system
                if outcome.manifest:
                    manifest["systems"][outcome.name] = outcome.manifest
    finally:
        for r in retrievers.values():
            r.close()
    write_results(out, result)
    write_text(out / "report.md", render_markdown(cfg, result))
    write_text(out / "report.html", render_html(cfg, result))
    return StudyOutcome(cfg, pairs, result)


def _lazy(sspec: ScopedSystem, source: str) -> LazyRetriever:

    return LazyRetriever(lambda: create(sspec.adapter, sspec.params, name=sspec.label, where=source))


def _chunk(
    chunker: Chunker, documents: Corpus, out: Path, max_content: int, manifest: dict[str, Any], log: Progress
) -> tuple[ChunkSet, dict[str, Any]]:
    """Chunk the corpus; record the chunker's statistics in the manifest and chunkers/<name>.json."""
    t0 = time.perf_counter()
    chunks = chunker.chunk_corpus(documents)
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
    return chunks, stats


def _run_pair(
    cfg: ChunkingModel,
    chunker_name: str,
    cblock: dict[str, object],
    sspec: ScopedSystem,
    lazy: LazyRetriever,
    chunks: ChunkSet,
    corpus: Corpus,
    data: StudyData,
    stats: dict[str, Any],
    force: bool,
    log: Progress,
) -> Outcome:
    """One (chunker, system) pair through the cell runner, with the chunk statistics and encode counts."""
    key = f"{chunker_name}{SEPARATOR}{sspec.label}"
    cell = Cell(
        key,
        SystemDir.of(cfg.output_dir, key),
        search_fingerprint(cfg, cblock, sspec),
        pair_hash(cfg, cblock, sspec),
        cfg.depth,
        cfg.batch_size,
        manifest={"chunker": cblock, "adapter": sspec.adapter},
    )
    before: list[int] = [0, 0]

    def retriever() -> Retriever:
        r = lazy()
        enc = encoder_of(r)
        if enc is not None:
            before[:] = [enc.stats.by_role["document"]["encoded"], enc.stats.by_role["query"]["encoded"]]
        return BestChunkDocuments(r, chunks) if data.qrels is not None else with_scope(r, sspec.scope)

    def extra(r: Retriever, timings: dict[str, float]) -> dict[str, Any]:
        out: dict[str, Any] = {"chunker": chunker_name, "system": sspec.label}
        out["chunks"] = {k: v for k, v in stats.items() if k != "chunk_seconds"}
        if isinstance(r, BestChunkDocuments):
            out["deeper"] = dict(r.deeper)
        out["timings"] = {"chunk_seconds": stats["chunk_seconds"], **timings}
        enc = encoder_of(r)
        if enc is not None and "index_seconds" in timings:
            # the index time of a dense system is its encode time; the counts say how much came from the cache
            out["timings"] |= {
                "encode_seconds": timings["index_seconds"],
                "chunks_encoded": enc.stats.by_role["document"]["encoded"] - before[0],
                "queries_encoded": enc.stats.by_role["query"]["encoded"] - before[1],
            }
        return out

    def score(run: Run, _answers: object, scopes: Scopes | None = None) -> Scored:
        if data.qrels is not None:  # a document run (BestChunkDocuments) against the dataset's qrels
            return Scored(evaluate(run, data.qrels, cfg.metrics, cfg.settings, system=key))
        return Scored(score_pair(run, chunks, data.spans, cfg, key, scopes))

    outcome = run_cell(
        cell,
        retriever,
        CellData(corpus, data.queries, data.groups or None),
        CellStages(score, describe=extra, aggregate=cfg.settings.aggregate_kwargs()),
        force=force,
        log=log,
    )
    outcome.info = {"chunker": chunker_name, "system": sspec.label}
    if outcome.index_error:
        outcome.system.extra = {**(outcome.system.extra or {}), **outcome.info}
    elif not outcome.skipped:
        s = outcome.system.means()
        log(f"{key}: " + ", ".join(f"{m} {fmt.num(s[m], 3)}" for m in cfg.metrics[:4] if m in s))  # NaN: n/a
    return outcome
