"""Building the knowledge base K and the candidates from a config's sources; their status against K."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.config.impact import CandidateSource, FileSource, GoldSource, NearDuplicateSource
from retbench.data import Corpus, Dataset, Qrels
from retbench.errors import ConfigError, InputError
from retbench.io.beir import read_corpus
from retbench.studies.impact.config import REMOVING
from retbench.studies.impact.novelty import text_hash


def concat_corpora(a: Corpus, b: Corpus) -> Corpus:
    """K + extra documents as one corpus (a's join rule)."""
    return Corpus(
        [*a.ids, *b.ids],
        [*a.texts, *b.texts],
        [a.title(i) for i in range(len(a))] + [b.title(i) for i in range(len(b))],
        None,
        join_rule=a.join_rule,
        name=a.name,
    )


def near_duplicate(text: str, rng: random.Random, edits: int = 3) -> str:
    """A light edit of a text: `edits` seeded operations, each a swap of two adjacent words, a word deleted,
    or a word's case flipped. Used to make near-duplicates that should be recognized as not novel."""
    words = text.split(" ")
    for _ in range(edits):
        if len(words) < 3:
            break
        op = rng.choice(("swap", "delete", "case"))
        i = rng.randrange(len(words) - 1)
        if op == "swap":
            words[i], words[i + 1] = words[i + 1], words[i]
        elif op == "delete":
            del words[i]
        else:
            w = words[i]
            words[i] = w.lower() if w != w.lower() else w.upper()
    return " ".join(words)


@dataclass
class CandidateSet:
    """The knowledge base K, the candidates (with their group), and how they were made."""

    kb: Corpus
    candidates: Corpus
    groups: list[str]
    info: dict[str, Any] = field(default_factory=dict)


#: a source's documents: ids, titles, texts, metadata
_Made = tuple[list[str], list[str], list[str], list[dict[str, Any]]]


def _as_made(corpus: Corpus, docs: list[str]) -> _Made:
    index = corpus.index
    return docs, [corpus.title(index[d]) for d in docs], [corpus.texts[index[d]] for d in docs], [{} for _ in docs]


def _removed(
    corpus: Corpus,
    qrels: Qrels,
    query_ids: Sequence[str],
    sources: Sequence[CandidateSource],
    relevance_level: int,
    seed: int,
    info: dict[str, Any],
) -> tuple[dict[int, _Made], set[str]]:
    """The `gold` and `holdout` sources: documents taken out of K (in source order) to be offered back."""
    made: dict[int, _Made] = {}
    removed: set[str] = set()
    index = corpus.index
    for i, s in enumerate(sources):
        if s.kind not in REMOVING:
            continue
        rng = random.Random(s.seed if s.seed is not None else seed)
        if isinstance(s, GoldSource):
            eligible = [
                q for q in query_ids if any(g >= relevance_level and d in index for d, g in qrels.get(q, {}).items())
            ]
            if s.queries > len(eligible):
                raise ConfigError(
                    f"asked for {s.queries} gold queries, only {len(eligible)} have relevant documents in the corpus",
                    field=f"candidates[{i}].queries",
                )
            chosen = sorted(rng.sample(eligible, s.queries), key=list(query_ids).index)
            docs = list(
                dict.fromkeys(d for q in chosen for d, g in qrels[q].items() if g >= relevance_level and d in index)
            )
            info["sources"].append({"kind": "gold", "queries": chosen, "documents": len(docs)})
        else:
            assert not isinstance(s, FileSource)  # REMOVING: gold (above) and holdout
            pool = [d for d in corpus.ids if d not in removed]
            docs = rng.sample(pool, min(s.n, len(pool)))
            info["sources"].append({"kind": "holdout", "documents": len(docs)})
        docs = [d for d in docs if d not in removed]
        removed.update(docs)
        made[i] = _as_made(corpus, docs)
    return made, removed


def _sampled(
    corpus: Corpus,
    kb_ids: list[str],
    sources: Sequence[CandidateSource],
    seed: int,
    base: Path | None,
    info: dict[str, Any],
) -> dict[int, _Made]:
    """The `file`, `present` and `near_duplicate` sources (samples of what stays in K, or documents from a file)."""
    made: dict[int, _Made] = {}
    taken: set[str] = set()
    for i, s in enumerate(sources):
        kind = s.kind
        if kind in REMOVING:
            continue
        rng = random.Random(s.seed if s.seed is not None else seed)
        if isinstance(s, FileSource):
            path = Path(s.path)
            if base is not None and not path.is_absolute() and not path.exists():
                path = base / path
            extra = read_corpus(path)
            ids = [str(x) for x in extra.ids]
            made[i] = (ids, [extra.title(j) for j in range(len(extra))], list(extra.texts), [{} for _ in ids])
            info["sources"].append({"kind": "file", "path": str(path), "documents": len(ids)})
            continue
        assert not isinstance(s, GoldSource)  # REMOVING
        pool = [d for d in kb_ids if d not in taken]
        docs = rng.sample(pool, min(s.n, len(pool)))
        taken.update(docs)
        if kind == "present":
            made[i] = _as_made(corpus, docs)
        elif isinstance(s, NearDuplicateSource):
            edits = s.edits
            ids, titles, texts, _ = _as_made(corpus, docs)
            texts = [near_duplicate(x, rng, edits) for x in texts]
            made[i] = ([f"{d}~nd" for d in ids], titles, texts, [{"near_duplicate_of": d, "edits": edits} for d in ids])
        info["sources"].append({"kind": kind, "documents": len(docs)})
    return made


def build_candidates(
    corpus: Corpus,
    qrels: Qrels,
    query_ids: Sequence[str],
    sources: Sequence[CandidateSource],
    *,
    relevance_level: int = 1,
    seed: int = 0,
    base: Path | None = None,
) -> CandidateSet:
    """Make K and the candidates from the config's sources (removals first, then samples of what stays in K).

    - `gold`: the relevant documents of N random evaluation queries are removed from K and offered back;
    - `holdout`: N random documents are removed from K and offered back;
    - `present`: N random documents still in K (adding them must change nothing);
    - `near_duplicate`: light seeded edits of N other random documents of K, under new ids;
    - `file`: documents from a BEIR corpus.jsonl.
    """
    info: dict[str, Any] = {"sources": []}
    made, removed = _removed(corpus, qrels, query_ids, sources, relevance_level, seed, info)
    kb_ids = [d for d in corpus.ids if d not in removed]
    if not kb_ids:
        raise ConfigError("the sources remove every document: nothing left to ingest into", field="candidates")
    made.update(_sampled(corpus, kb_ids, sources, seed, base, info))
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    meta: list[dict[str, Any]] = []
    groups: list[str] = []
    for i, s in enumerate(sources):
        a, b, c, m = made[i]
        group = s.group or (Path(s.path).stem if isinstance(s, FileSource) else s.kind)
        ids += a
        titles += b
        texts += c
        meta += [{**x, "group": group} for x in m]
        groups += [group] * len(a)
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise InputError(f"candidate id {dup!r} appears twice among the candidates", field="candidates")
    cands = Corpus(ids, texts, titles, meta, join_rule=corpus.join_rule, name="candidates")
    info["removed"] = len(removed)
    return CandidateSet(corpus.subset(kb_ids), cands, groups, info)


def candidate_status(kb: Corpus, cands: Corpus, dedupe: str) -> tuple[list[str], list[str | None]]:
    """'present' (id already in K), 'duplicate' (same indexed text as a K document; with dedupe: text) or 'new'."""
    hashes: dict[str, str] = {}
    if dedupe == "text":
        for i in range(len(kb)):
            hashes.setdefault(text_hash(kb.joined(i)), str(kb.ids[i]))
    status: list[str] = []
    dup_of: list[str | None] = []
    for i in range(len(cands)):
        cid = str(cands.ids[i])
        if cid in kb:
            status.append("present")
            dup_of.append(cid)
            continue
        other = hashes.get(text_hash(cands.joined(i))) if dedupe == "text" else None
        status.append("duplicate" if other else "new")
        dup_of.append(other)
    return status, dup_of


def reference_answers(
    cfg_refs: str, ds: Dataset, qrels: Qrels, qids: Sequence[str], level: int, base: Path | None = None
) -> dict[str, list[str]]:
    """Reference answers per query: `gold_documents` (the texts of the query's relevant documents, from the full
    corpus: a stand-in where a dataset has no answers) or a JSONL file of {"query_id", "answer"} lines."""
    import json

    if cfg_refs == "gold_documents":
        idx = ds.corpus.index
        return {q: [ds.corpus.texts[idx[d]] for d, g in qrels[q].items() if g >= level and d in idx] for q in qids}
    path = Path(cfg_refs)
    if base is not None and not path.is_absolute() and not path.exists():
        path = base / path
    out: dict[str, list[str]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("reference answers file not found", path=path) from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg})", path=path, line=n) from None
        q, a = obj.get("query_id"), obj.get("answer")
        if not isinstance(q, str) or not isinstance(a, str):
            raise InputError("each line needs string fields query_id and answer", path=path, line=n)
        out.setdefault(q, []).append(a)
    return out
