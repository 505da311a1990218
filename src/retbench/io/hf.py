"""Hugging Face `datasets`: BEIR datasets by hub name, and local parquet/JSON files.

Corpora stay in Arrow (memory-mapped from the datasets cache), and the Corpus sees them through lazy
columns, so a corpus of millions of documents never becomes millions of Python objects at load.
Hub loading (`BeIR/<name>` with configs `corpus` and `queries`, `BeIR/<name>-qrels`) needs network;
the same code path reads a local folder laid out like such a hub repository (`hf:<folder>`: a README.md
whose `configs` name the corpus and queries files, qrels in `<folder>/qrels/<split>.tsv` or in a sibling
`<folder>-qrels`), which is what `write_hf_beir` writes and how it is tested offline. Ids are read as
strings whatever they look like (`007` stays `007`), and metadata travels as a JSON text column, so a
BEIR folder makes the round trip BEIR -> HF folder -> BEIR byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from retbench.data import Corpus, Dataset, Qrels, Queries
from retbench.data.qrels import checked_grade
from retbench.errors import InputError
from retbench.jsontypes import JSONValue


class ArrowColumn(Sequence[str]):
    """A read-only, lazily converted string column of an Arrow-backed HF dataset."""

    def __init__(self, table: Any, name: str) -> None:
        self._col = table.column(name)
        self._len = len(self._col)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [("" if v is None else str(v)) for v in self._col[i].to_pylist()]
        v = self._col[i].as_py()
        return "" if v is None else str(v)

    def __iter__(self) -> Iterator[str]:
        for chunk in self._col.chunks:
            for v in chunk.to_pylist():
                yield "" if v is None else str(v)


def _load(kind: str, files: str | list[str]) -> Any:
    import datasets

    return datasets.load_dataset(kind, data_files=files, split="train")


def _builder_for(path: str) -> str:
    suffixes = Path(path).suffixes
    if ".parquet" in suffixes:
        return "parquet"
    if ".json" in suffixes or ".jsonl" in suffixes:
        return "json"
    if ".csv" in suffixes or ".tsv" in suffixes:
        return "csv"
    raise InputError("unsupported file type (use parquet, json/jsonl or csv/tsv)", path=path)


def corpus_from_hf(ds: Any, *, join_rule: str = "title_space_text", name: str = "", path: str = "") -> Corpus:
    """Wrap an HF dataset with `_id`, `text` and optional `title` columns as a lazy Corpus."""
    cols = set(ds.column_names)
    for required in ("_id", "text"):
        if required not in cols:
            raise InputError(
                f"corpus has no '{required}' column (has: {', '.join(sorted(cols))})", path=path or None, field=required
            )
    if len(ds) == 0:
        raise InputError("corpus is empty (no documents)", path=path or None)
    meta = [json.loads(m) if m else {} for m in ds["metadata"]] if "metadata" in cols else None
    return corpus_from_arrow(ds.data, metadata=meta, join_rule=join_rule, name=name)  # the memory-mapped Arrow table


def corpus_from_arrow(
    table: Any,
    *,
    metadata: Sequence[Mapping[str, JSONValue]] | None = None,
    join_rule: str = "title_space_text",
    name: str = "",
) -> Corpus:
    """A lazy Corpus over a pyarrow Table with `_id`, `text` and optional `title` columns (e.g.
    `pyarrow.parquet.read_table(path, memory_map=True)`): strings become Python objects a batch at a time."""
    titles = ArrowColumn(table, "title") if "title" in table.column_names else None
    return Corpus(
        ArrowColumn(table, "_id"), ArrowColumn(table, "text"), titles, metadata, join_rule=join_rule, name=name
    )


def queries_from_hf(ds: Any, path: str = "") -> Queries:
    for required in ("_id", "text"):
        if required not in ds.column_names:
            raise InputError(f"queries have no '{required}' column", path=path or None, field=required)
    ids = [str(x) for x in ds["_id"]]
    meta = {}
    if "metadata" in ds.column_names:
        meta = {q: json.loads(m) for q, m in zip(ids, ds["metadata"], strict=True) if m}
    return Queries(dict(zip(ids, ds["text"], strict=True)), meta)


def qrels_from_hf(ds: Any, path: str = "") -> Qrels:
    cols = ds.column_names
    for required in ("query-id", "corpus-id", "score"):
        if required not in cols:
            raise InputError(
                f"qrels have no '{required}' column (has: {', '.join(cols)})", path=path or None, field=required
            )
    judgements: dict[str, dict[str, int]] = {}
    for row, (q, d, s) in enumerate(zip(ds["query-id"], ds["corpus-id"], ds["score"], strict=True)):
        try:
            grade = checked_grade(s)  # the qrels files' rule: a fraction is refused, not cut to an integer
        except ValueError as exc:
            raise InputError(str(exc), path=path or None, field=f"score[{row}]") from None
        judgements.setdefault(str(q), {})[str(d)] = grade
    return Qrels(judgements)


def load_hf_files(
    corpus: str | Path,
    queries: str | Path,
    qrels: dict[str, str | Path],
    *,
    join_rule: str = "title_space_text",
    name: str = "",
) -> Dataset:
    """A dataset from local parquet/JSON/CSV files read through `datasets` (Arrow, memory-mapped)."""
    for p in [corpus, queries, *qrels.values()]:
        if not Path(p).is_file():
            raise InputError("file not found", path=p)
    c = corpus_from_hf(_load(_builder_for(str(corpus)), str(corpus)), join_rule=join_rule, name=name, path=str(corpus))
    q = queries_from_hf(_load(_builder_for(str(queries)), str(queries)), str(queries))
    qr = {}
    for split, path in qrels.items():
        kind = _builder_for(str(path))
        if kind == "csv":
            import datasets

            ds = datasets.load_dataset(
                "csv", data_files=str(path), split="train", delimiter="\t" if str(path).endswith(".tsv") else ","
            )
        else:
            ds = _load(kind, str(path))
        qr[split] = qrels_from_hf(ds, str(path))
    return Dataset(name or Path(corpus).parent.name, c, q, qr, path=str(Path(corpus).parent))


def _qrels_features() -> object:
    import datasets

    return datasets.Features(
        {"query-id": datasets.Value("string"), "corpus-id": datasets.Value("string"), "score": datasets.Value("int64")}
    )


def local_cache_dir(folder: Path) -> str:
    """A `datasets` cache folder keyed by the folder's content (sha256 over every file's path and bytes).

    `datasets` keys the cache of a local folder by its files' paths and coarse modification times, so a
    folder rewritten in place (same sizes, same second) was served from the old Arrow cache. Hashing the
    bytes costs one read of the folder (about a second per GB) and makes a rewrite a new cache entry; old
    entries stay on disk under `<HF_DATASETS_CACHE>/retbench-local/` until removed.
    """
    from datasets import config

    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file() and not q.name.startswith(".")):
        h.update(str(p.relative_to(folder)).encode() + b"\0")
        with p.open("rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
        h.update(b"\0")
    return str(Path(config.HF_DATASETS_CACHE) / "retbench-local" / h.hexdigest()[:16])


def load_hf_beir(name: str, splits: list[str] | None = None, *, join_rule: str = "title_space_text") -> Dataset:
    """A BEIR dataset from the hub (BeIR/<name>, BeIR/<name>-qrels; needs network) or a local folder so laid out."""
    import datasets

    local = Path(name).expanduser().is_dir()
    repo = str(Path(name).expanduser()) if local else (name if "/" in name else f"BeIR/{name}")
    qrels_repo = str(Path(repo) / "qrels") if local and (Path(repo) / "qrels").is_dir() else f"{repo}-qrels"
    cache = None
    if local:
        cache = local_cache_dir(Path(repo))
        if Path(qrels_repo).resolve().parent != Path(repo).resolve():  # a sibling <folder>-qrels
            cache += "-" + Path(local_cache_dir(Path(qrels_repo))).name
    try:
        corpus = datasets.load_dataset(repo, "corpus", split="corpus", cache_dir=cache)
        queries = datasets.load_dataset(repo, "queries", split="queries", cache_dir=cache)
        if local:  # each <split>.tsv by its own name (the hub's inference would turn dev into validation)
            files = {p.name.removesuffix(".tsv"): str(p) for p in sorted(Path(qrels_repo).glob("*.tsv"))}
            qrels_all = datasets.load_dataset(
                "csv", data_files=files, delimiter="\t", features=_qrels_features(), cache_dir=cache
            )
        else:
            qrels_all = datasets.load_dataset(qrels_repo, features=_qrels_features())
    except Exception as exc:  # offline, unknown name, or hub error: one actionable message
        where = "the folder" if local else "the Hugging Face hub"
        raise InputError(f"cannot load {repo} from {where} ({type(exc).__name__}: {exc})", field="dataset") from None
    wanted = splits or list(qrels_all)
    missing = [s for s in wanted if s not in qrels_all]
    if missing:
        raise InputError(
            f"no qrels split {missing[0]!r} (have: {', '.join(qrels_all)})", path=f"{repo}-qrels", field="split"
        )
    return Dataset(
        name,
        corpus_from_hf(corpus, join_rule=join_rule, name=name, path=repo),
        queries_from_hf(queries, repo),
        {s: qrels_from_hf(qrels_all[s], f"{repo}-qrels") for s in wanted},
        path=f"hf:{repo}",
    )


CONFIGS = """---
configs:
- config_name: corpus
  data_files:
  - split: corpus
    path: corpus.jsonl
- config_name: queries
  data_files:
  - split: queries
    path: queries.jsonl
---
A BEIR dataset laid out as a Hugging Face dataset repository (written by retbench; load with `hf:<this folder>`).
"""


def write_hf_beir(dataset: Dataset, folder: str | Path) -> Path:
    """Write `dataset` as a local Hugging Face dataset folder that `hf:<folder>` reads back exactly.

    corpus.jsonl / queries.jsonl with every column present on every row (metadata as JSON text, so
    rows with different metadata keys share one schema), a README.md naming the configs as hub
    repositories do, and qrels/<split>.tsv.
    """
    root = Path(folder)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    c = dataset.corpus
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for i in range(len(c)):
            meta = c.metadata[i] if c.metadata is not None and c.metadata[i] else None
            row = {
                "_id": c.ids[i],
                "title": c.title(i),
                "text": c.texts[i],
                "metadata": json.dumps(meta) if meta else "",
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in dataset.queries.items():
            meta = dataset.queries.metadata.get(qid)
            fh.write(
                json.dumps({"_id": qid, "text": text, "metadata": json.dumps(meta) if meta else ""}, ensure_ascii=False)
                + "\n"
            )
    for split, qrels in dataset.qrels.items():
        with open(root / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            fh.writelines(f"{q}\t{d}\t{g}\n" for q, docs in qrels.items() for d, g in docs.items())
    (root / "README.md").write_text(CONFIGS, encoding="utf-8")
    return root
