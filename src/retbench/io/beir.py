"""BEIR folders exactly as BEIR writes them.

    corpus.jsonl[.gz]   {"_id", "title"?, "text", "metadata"?} per line
    queries.jsonl[.gz]  {"_id", "text", "metadata"?} per line
    qrels/<split>.tsv   header `query-id<TAB>corpus-id<TAB>score`, then one judgement a line

The indexed text of a document is "title text" stripped (BEIR's rule); the rule is recorded on the
Corpus so manifests can say how documents were joined.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from retbench.data import Corpus, Dataset, Qrels, Queries
from retbench.data.ids import first_bad_id, id_problem
from retbench.data.qrels import checked_grade
from retbench.errors import InputError
from retbench.io.files import find_variant, iter_jsonl, iter_lines, open_text


def _string_field(obj: dict, key: str, path: Path, lineno: int, *, required: bool) -> str:
    if key not in obj or obj[key] is None:
        if required:
            raise InputError("missing required field", path=path, line=lineno, field=key)
        return ""
    value = obj[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "_id":
        return str(value)
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", path=path, line=lineno, field=key)
    return value


def _check_ids(ids: list[str], line_of: dict[str, int], path: Path) -> None:
    """Every id usable in a TREC file (no whitespace or control characters); the first bad one is named."""
    bad = first_bad_id(ids)
    if bad is not None:
        raise InputError(bad[1], path=path, line=line_of.get(ids[bad[0]]), field="_id")


def read_corpus(path: str | Path, join_rule: str = "title_space_text", name: str = "") -> Corpus:
    p = Path(path)
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    metadata: list[dict] = []
    first_line: dict[str, int] = {}
    for lineno, obj in iter_jsonl(p):
        doc_id, title, text = obj.get("_id"), obj.get("title", ""), obj.get("text")
        # fast path for well-formed lines; the checks below name the field that is wrong
        if type(doc_id) is not str or type(text) is not str or type(title) is not str:
            doc_id = _string_field(obj, "_id", p, lineno, required=True)
            title = _string_field(obj, "title", p, lineno, required=False)
            text = _string_field(obj, "text", p, lineno, required=True)
        if not doc_id:
            raise InputError("empty document id", path=p, line=lineno, field="_id")
        if doc_id in first_line:
            raise InputError(
                f"duplicate document id {doc_id!r} (first seen on line {first_line[doc_id]})",
                path=p,
                line=lineno,
                field="_id",
            )
        first_line[doc_id] = lineno
        ids.append(doc_id)
        titles.append(title)
        texts.append(text)
        meta = obj.get("metadata") or {}
        metadata.append(meta if type(meta) is dict else {"value": meta})
    if not ids:
        raise InputError("corpus is empty (no documents)", path=p)
    _check_ids(ids, first_line, p)
    return Corpus(ids, texts, titles, metadata, join_rule=join_rule, name=name)


def read_queries(path: str | Path) -> Queries:
    p = Path(path)
    texts: dict[str, str] = {}
    metadata: dict[str, dict] = {}
    first_line: dict[str, int] = {}
    for lineno, obj in iter_jsonl(p):
        qid = _string_field(obj, "_id", p, lineno, required=True)
        if qid in first_line:
            raise InputError(
                f"duplicate query id {qid!r} (first seen on line {first_line[qid]})", path=p, line=lineno, field="_id"
            )
        first_line[qid] = lineno
        texts[qid] = _string_field(obj, "text", p, lineno, required=True)
        if obj.get("metadata"):
            metadata[qid] = obj["metadata"]
    if not texts:
        raise InputError("queries file is empty", path=p)
    _check_ids(list(texts), first_line, p)
    return Queries(texts, metadata)


def query_line(folder: str | Path, qid: str) -> tuple[Path, int] | None:
    """(queries file, line) of query `qid` in a BEIR folder, for an error that names it (None elsewhere)."""
    root = Path(folder)
    path = find_variant(root, "queries.jsonl") if root.is_dir() else None
    if path is None:
        return None
    for lineno, obj in iter_jsonl(path):
        if str(obj.get("_id")) == qid:
            return path, lineno
    return None


def read_qrels_tsv(path: str | Path) -> tuple[Qrels, int]:
    """Read BEIR qrels; returns (qrels, number of lines repeating a judgement with the same grade, kept once).

    A (query, doc) judged twice with different grades is refused naming both lines: which grade is right cannot
    be guessed (trec_eval refuses any repeat; an identical repeated line, which converted BEIR files sometimes
    hold, changes nothing and is counted instead)."""
    p = Path(path)
    judgements: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}  # (query, doc) -> the line that judged it
    repeated = 0
    for lineno, line in iter_lines(p):
        if lineno == 1 and line.lower().startswith("query-id"):
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise InputError(
                f"expected 3 tab-separated columns (query-id corpus-id score), got {len(parts)}", path=p, line=lineno
            )
        qid, doc, score = (x.strip() for x in parts)
        for field_name, value in (("query-id", qid), ("corpus-id", doc)):
            problem = id_problem(value)
            if problem:
                raise InputError(problem, path=p, line=lineno, field=field_name)
        try:
            grade = checked_grade(score)
        except ValueError as exc:
            raise InputError(str(exc), path=p, line=lineno, field="score") from None
        docs = judgements.setdefault(qid, {})
        if doc in docs:
            if docs[doc] != grade:
                raise InputError(
                    f"document {doc!r} is judged twice for query {qid!r} with different grades ({docs[doc]} on line "
                    f"{first[qid, doc]}, {grade} on line {lineno}): keep the right one",
                    path=p,
                    line=lineno,
                    field="score",
                )
            repeated += 1
            continue
        first[qid, doc] = lineno
        docs[doc] = grade
    return Qrels(judgements), repeated


def check_qrels(qrels: Qrels, corpus: Corpus, queries: Queries, path: Path | str, *, strict: bool) -> list[str]:
    """Problems with ids in qrels: counted and reported, or raised under `strict` (`path`: a file, or a label)."""
    problems = []
    label = path.name if isinstance(path, Path) else path
    unknown_q = [q for q in qrels if q not in queries]
    unknown_d = {(q, d) for q, docs in qrels.items() for d in docs if d not in corpus}
    if unknown_q:
        msg = f"{len(unknown_q)} quer{'y' if len(unknown_q) == 1 else 'ies'} not in queries (e.g. {unknown_q[0]!r})"
        if strict:
            raise InputError(msg, path=path, field="query-id")
        problems.append(f"{label}: {msg}")
    if unknown_d:
        example = sorted(unknown_d)[0]
        msg = f"{len(unknown_d)} judgement(s) name documents not in the corpus (e.g. {example[1]!r} for query {example[0]!r})"
        if strict:
            raise InputError(msg, path=path, field="corpus-id")
        problems.append(f"{label}: {msg}")
    return problems


def qrels_splits(folder: Path) -> dict[str, Path]:
    qdir = folder / "qrels"
    if not qdir.is_dir():
        return {}
    out: dict[str, Path] = {}
    for f in sorted(qdir.iterdir()):
        split = f.name[: -len(".tsv")] if f.name.endswith(".tsv") else f.name[: -len(".tsv.gz")]
        if f.name.endswith((".tsv", ".tsv.gz")) and out.setdefault(split, f) != f:
            raise InputError(
                f"both {out[split].name} and {f.name} are here, so which one to read is ambiguous: remove or rename one",
                path=qdir,
            )
    return out


def read_beir(
    folder: str | Path,
    splits: list[str] | None = None,
    *,
    strict: bool = False,
    join_rule: str = "title_space_text",
    name: str | None = None,
) -> Dataset:
    """Load a BEIR folder; `splits=None` loads every qrels split present."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError("dataset folder not found", path=root)
    corpus_path = find_variant(root, "corpus.jsonl")
    if corpus_path is None:
        raise InputError("no corpus.jsonl or corpus.jsonl.gz", path=root)
    queries_path = find_variant(root, "queries.jsonl")
    if queries_path is None:
        raise InputError("no queries.jsonl or queries.jsonl.gz", path=root)
    ds_name = name or root.name
    corpus = read_corpus(corpus_path, join_rule=join_rule, name=ds_name)
    queries = read_queries(queries_path)
    available = qrels_splits(root)
    wanted = list(available) if splits is None else splits
    qrels: dict[str, Qrels] = {}
    problems: list[str] = []
    for split in wanted:
        if split not in available:
            have = ", ".join(available) or "none"
            raise InputError(f"no qrels for split {split!r} (have: {have})", path=root / "qrels", field="split")
        qrels[split], repeated = read_qrels_tsv(available[split])
        if repeated:
            problems.append(
                f"{available[split].name}: {repeated} line(s) repeat a judgement with the same grade; kept once"
            )
        problems += check_qrels(qrels[split], corpus, queries, available[split], strict=strict)
    return Dataset(ds_name, corpus, queries, qrels, path=str(root), problems=problems)


def write_beir(dataset: Dataset, folder: str | Path, *, compress: bool = False) -> None:
    """Write a dataset as a BEIR folder (the inverse of `read_beir`)."""
    root = Path(folder)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    ext = ".jsonl.gz" if compress else ".jsonl"
    c = dataset.corpus
    with open_text(root / f"corpus{ext}", "wt") as fh:
        for i in range(len(c)):
            obj: dict[str, Any] = {"_id": c.ids[i], "title": c.title(i), "text": c.texts[i]}
            if c.metadata is not None and c.metadata[i]:
                obj["metadata"] = c.metadata[i]
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
    with open_text(root / f"queries{ext}", "wt") as fh:
        for qid, text in dataset.queries.items():
            obj2: dict[str, Any] = {"_id": qid, "text": text}
            if qid in dataset.queries.metadata:
                obj2["metadata"] = dataset.queries.metadata[qid]
            fh.write(json.dumps(obj2, ensure_ascii=False) + "\n")
    for split, qrels in dataset.qrels.items():
        with open_text(root / "qrels" / f"{split}.tsv", "wt") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            for qid, docs in qrels.items():
                for doc, grade in docs.items():
                    fh.write(f"{qid}\t{doc}\t{grade}\n")
