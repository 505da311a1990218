"""From trace files to a BEIR-style dataset folder with the live system's run: `import_traces`, one call.

    DIR/queries.jsonl        {"_id", "text", "metadata": {"trace_ids", "count", "first_seen", "last_seen", ...}}
    DIR/corpus.jsonl         the document texts seen in spans (those a given corpus lacks)
    DIR/runs/<system>.trec   what the live system served, one ranking per query (and `<system>.arrow`, its columnar copy)
    DIR/feedback.jsonl       user feedback, its own label source: {"qid", "doc_id", "kind", "value", "at", ...}
    DIR/import.json          the counts: spans read, retriever spans, other kinds, malformed spans (file,
                             span id, field), window, duplicates merged, sampling, documents, formats

The rules, in order:

1. Time window: `since` <= the span's start < `until` (UTC; a time without a zone is UTC). With a window,
   a retrieval without a timestamp cannot be placed and is left out, counted as `no_timestamp`.
2. Duplicates: two retrievals are one query when their keys are equal; the key is the text under
   Unicode NFKC, casefolded, with punctuation removed and runs of whitespace made one space (ends stripped).
   Same raw text counts as an exact duplicate, same key but other text as a near duplicate. The query's
   text is its earliest occurrence's; its ranking is the earliest one that did not fail live (a query that
   only failed is recorded as failed, never as an empty answer). `metadata.rankings` says how many distinct
   rankings the system served for it, `variants` the other texts merged into it.
3. Sampling (`max_queries`): the queries whose SHA-256 of `"<seed>:<key>"` is smallest are kept. The rule
   is reproducible for a seed and stable as logs grow: a query kept from a smaller log is kept from a
   larger one unless a query with a smaller hash arrived.
4. Query ids are `q-` and the first 12 hex digits of the SHA-256 of the key, so re-importing a log keeps ids.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from retbench.data import QueryStatus, Run, RunBuilder
from retbench.data.ids import served_scores
from retbench.io.beir import read_corpus
from retbench.io.files import write_json, write_jsonl
from retbench.io.run_files import write_run_files
from retbench.io.traces.model import Problem, Retrieval
from retbench.io.traces.read import read_traces
from retbench.io.trec import run_tag

NEAR_RULE = "NFKC, casefold, punctuation removed, whitespace runs collapsed to one space, ends stripped"
SAMPLE_RULE = "keep the max_queries queries with the smallest sha256('<seed>:<key>')"
_SPACE = re.compile(r"\s+")


def query_key(text: str) -> str:
    """The near-duplicate key of a query text (see NEAR_RULE)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    no_punct = "".join(" " if unicodedata.category(c).startswith("P") else c for c in folded)
    return _SPACE.sub(" ", no_punct).strip()


def qid_of(key: str) -> str:
    return "q-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def sample_rank(key: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class Query:
    """Every occurrence of one query (by key), earliest first."""

    key: str
    seen: list[Retrieval] = field(default_factory=list)

    @property
    def served(self) -> Retrieval:
        """The occurrence whose ranking is the live run's: the earliest that did not fail live."""
        return next((r for r in self.seen if r.error is None), self.seen[0])

    def metadata(self) -> dict[str, Any]:
        texts = Counter(r.query for r in self.seen)
        first = self.seen[0]
        times = [r.at for r in self.seen if r.at is not None]
        return {
            "trace_ids": list(dict.fromkeys(r.trace_id for r in self.seen if r.trace_id)),
            "span_ids": [r.span_id for r in self.seen],
            "count": len(self.seen),
            "first_seen": _iso(min(times)) if times else None,
            "last_seen": _iso(max(times)) if times else None,
            "variants": {t: n for t, n in texts.items() if t != first.query},
            "rankings": len({tuple(d.doc_id for d in r.documents) for r in self.seen if r.error is None}),
            "failed": sum(r.error is not None for r in self.seen),
            "sessions": sorted({r.session for r in self.seen if r.session}),
            "users": sorted({r.user for r in self.seen if r.user}),
            "sources": sorted({r.source for r in self.seen}),
        }


@dataclass
class TraceImport:
    """What `import_traces` wrote: the folder, the counts (import.json) and each malformed span."""

    out: Path
    summary: dict[str, Any]
    problems: list[Problem]
    system: str


def _in_window(
    retrievals: Sequence[Retrieval], since: datetime | None, until: datetime | None
) -> tuple[list[Retrieval], int, int]:
    """(kept, outside the window, without a timestamp) for the window [since, until)."""
    if since is None and until is None:
        return list(retrievals), 0, 0
    kept, outside, untimed = [], 0, 0
    for r in retrievals:
        if r.at is None:
            untimed += 1
        elif (since is not None and r.at < since) or (until is not None and r.at >= until):
            outside += 1
        else:
            kept.append(r)
    return kept, outside, untimed


def _utc(at: datetime | None) -> datetime | None:
    return at if at is None or at.tzinfo else at.replace(tzinfo=timezone.utc)


def group_queries(retrievals: Iterable[Retrieval]) -> list[Query]:
    """Retrievals grouped by query key, each group and the groups in order of first occurrence (time, then file order)."""
    latest = datetime.max.replace(tzinfo=timezone.utc)
    ordered = sorted(enumerate(retrievals), key=lambda ir: (ir[1].at or latest, ir[0]))
    groups: dict[str, Query] = {}
    for _, r in ordered:
        key = query_key(r.query)
        groups.setdefault(key, Query(key)).seen.append(r)
    return list(groups.values())


def sample_queries(queries: list[Query], max_queries: int | None, seed: int) -> list[Query]:
    """The seeded sample (SAMPLE_RULE), in the queries' original order."""
    if max_queries is None or len(queries) <= max_queries:
        return queries
    keep = {q.key for q in sorted(queries, key=lambda q: sample_rank(q.key, seed))[:max_queries]}
    return [q for q in queries if q.key in keep]


def _ranking(r: Retrieval) -> tuple[list[tuple[str, float]], int, bool]:
    """(the served ranking with each document once at its best rank, repeats removed, scored by served order?)."""
    seen: set[str] = set()
    docs = []
    for d in r.documents:
        if d.doc_id not in seen:
            seen.add(d.doc_id)
            docs.append(d)
    scores = served_scores([d.score for d in docs])
    by_order = scores != [d.score for d in docs]
    return [(d.doc_id, s) for d, s in zip(docs, scores, strict=True)], len(r.documents) - len(docs), by_order


def _system(queries: list[Query], given: str | None) -> str:
    if given:
        return run_tag(given)
    sources = {r.source for q in queries for r in q.seen}
    return run_tag("live-" + sources.pop() if len(sources) == 1 else "live")


def _live_rows(
    sampled: list[Query], name: str
) -> tuple[Run, list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """(the live run, query rows, feedback rows, run counts) of the sampled queries."""
    builder, query_rows, feedback_rows = RunBuilder(name), [], []
    counts = {"queries": len(sampled), "failed_live": 0, "scored_by_served_order": 0, "repeated_documents_dropped": 0}
    for q in sampled:
        qid, served = qid_of(q.key), q.served
        query_rows.append({"_id": qid, "text": q.seen[0].query, "metadata": q.metadata()})
        if served.error is not None:
            counts["failed_live"] += 1
            builder.add(qid, status=QueryStatus.ERROR, error=f"failed live: {served.error}")
        else:
            ranking, dropped, by_order = _ranking(served)
            counts["repeated_documents_dropped"] += dropped
            counts["scored_by_served_order"] += by_order
            builder.add(qid, ranking)
        feedback_rows += [
            {
                "qid": qid,
                "doc_id": f.doc_id,
                "kind": f.kind,
                "value": f.value,
                "at": _iso(f.at or r.at),
                "trace_id": r.trace_id,
                "span_id": r.span_id,
            }
            for r in q.seen
            for f in r.feedback
        ]
    return builder.build(), query_rows, feedback_rows, counts


def _texts(retrievals: list[Retrieval], known: set[str]) -> tuple[dict[str, str], int]:
    """(doc id -> the first text a span recorded for it, ids a given corpus lacks; texts that disagreed later)."""
    texts: dict[str, str] = {}
    conflicts = 0
    for r in retrievals:
        for d in r.documents:
            if d.content is None or d.doc_id in known:
                continue
            conflicts += d.doc_id in texts and texts[d.doc_id] != d.content
            texts.setdefault(d.doc_id, d.content)
    return texts, conflicts


def import_traces(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    fmt: str = "auto",
    max_queries: int | None = None,
    seed: int = 0,
    since: datetime | None = None,
    until: datetime | None = None,
    system: str | None = None,
    id_key: str = "id",
    corpus: str | Path | None = None,
) -> TraceImport:
    """Read trace files and write the dataset folder (see the module docstring); returns what was written."""
    since, until = _utc(since), _utc(until)
    read = read_traces(paths, fmt, id_key)
    kept, outside, untimed = _in_window(read.retrievals, since, until)
    groups = group_queries(kept)
    sampled = sample_queries(groups, max_queries, seed)
    name = _system(sampled or groups, system)
    known = set(read_corpus(corpus).ids) if corpus is not None else set()
    run, query_rows, feedback_rows, run_counts = _live_rows(sampled, name)
    texts, conflicts = _texts(kept, known)

    out_dir = Path(out)
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    write_jsonl(out_dir / "queries.jsonl", query_rows)
    write_jsonl(
        out_dir / "corpus.jsonl",
        ({"_id": i, "title": "", "text": t, "metadata": {"source": "traces"}} for i, t in sorted(texts.items())),
    )
    write_run_files(run, out_dir / "runs" / f"{name}.trec", tag=name)  # with its columnar copy, runs/<system>.arrow
    write_jsonl(out_dir / "feedback.jsonl", feedback_rows)

    served_ids = set(run.doc_ids.tolist()) if len(run.doc_ids) else set()
    summary: dict[str, Any] = {
        "schema": 1,
        "files": [str(p) for p in paths],
        "formats": read.formats,
        "system": name,
        "spans": read.spans,
        "retriever_spans": len(read.retrievals),
        "other_spans": dict(sorted(read.other_kinds.items())),
        "malformed": {
            "count": len(read.problems),
            "by_field": dict(Counter(_field_class(p.field) for p in read.problems)),
            "spans": [p.as_json() for p in read.problems],
        },
        "window": {"since": _iso(since), "until": _iso(until), "outside": outside, "no_timestamp": untimed},
        "retrievals": len(kept),
        "duplicates": {
            "exact": sum(len(q.seen) - len({r.query for r in q.seen}) for q in groups),
            "near": sum(len({r.query for r in q.seen}) - 1 for q in groups),
            "near_rule": NEAR_RULE,
            "queries": len(groups),
        },
        "sampled": {
            "max_queries": max_queries,
            "seed": seed,
            "rule": SAMPLE_RULE,
            "kept": len(sampled),
            "dropped": len(groups) - len(sampled),
        },
        "run": run_counts,
        "documents": {
            "served": len(served_ids),
            "texts_written": len(texts),
            "without_text": len(served_ids - set(texts) - known),
            "already_in_corpus": len(served_ids & known),
            "text_conflicts": conflicts,
        },
        "feedback": len(feedback_rows),
    }
    write_json(out_dir / "import.json", summary)
    return TraceImport(out_dir, summary, read.problems, name)


def _field_class(fld: str) -> str:
    """A malformed field without its document index (`retrieval.documents.3.document.id` -> `...N.document.id`)."""
    return re.sub(r"\.\d+(?=\.|$)", ".N", fld)
