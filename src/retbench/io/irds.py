"""Datasets by their ir_datasets id (`irds:beir/scifact/test`), read through ir_datasets' own API.

PyTerrier and ranx users name data the ir_datasets way; retbench reads such a dataset with
`ir_datasets.load(id)` and its `docs_iter()`, `queries_iter()` and `qrels_iter()`, streamed once into the
columns a `Corpus` holds (ids, titles, texts: no second copy of the corpus). An ir_datasets id names one
set of queries and qrels, so they become the one split the caller asks for (default `test`).

A document's title is its `title` field when it has both `title` and `text` (BEIR's documents), so
retbench's join rule applies as it does to a BEIR folder; otherwise its text is ir_datasets'
`default_text()` (TREC documents, for instance) and its title is empty. A query's text is its `text`
field, else `default_text()` (a TREC topic's title).

Offline first: ir_datasets downloads a missing file on first use (and retries for a while when the
network is unreachable). retbench never lets it: while reading, ir_datasets' network downloaders raise
instead, and the user gets one line naming the file it needs and the folder it looks in
(`IR_DATASETS_HOME`, default `~/.ir_datasets`), exit 2. Setting `RETBENCH_IRDS_DOWNLOAD=1` lets
ir_datasets download as it normally would.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any, NoReturn

from retbench.data import Corpus, Dataset, Qrels, Queries
from retbench.data.qrels import checked_grade
from retbench.errors import InputError
from retbench.io.beir import check_qrels

PREFIX = "irds:"
#: set to 1 to let ir_datasets download missing files (retbench refuses by default: offline machines are common)
DOWNLOAD_ENV = "RETBENCH_IRDS_DOWNLOAD"

__all__ = ["DOWNLOAD_ENV", "PREFIX", "load_irds", "read_irds_qrels"]


class _NeedsDownload(Exception):
    """Raised in place of a network download; carries what ir_datasets wanted to fetch."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url
        self.target: str | None = None  # the file ir_datasets would have written, when known


def _url(downloader: object) -> str:
    return str(getattr(downloader, "url", None) or getattr(downloader, "_url", None) or downloader)


@contextlib.contextmanager
def _no_downloads() -> Iterator[None]:
    """Make ir_datasets' network downloaders raise `_NeedsDownload` (no request, no retry, no wait).

    The downloaders are classes of `ir_datasets.util.download`; their `stream` is swapped for the
    duration of a load and restored after it (a process-wide change: loads are not run concurrently).
    ir_datasets' log lines and progress bars (written to stderr) are held back meanwhile, so a refusal
    is the one line retbench prints.
    """
    if os.environ.get(DOWNLOAD_ENV, "").strip().lower() in ("1", "true", "yes"):
        yield
        return
    from ir_datasets.util import download

    def refuse(self: object) -> NoReturn:
        raise _NeedsDownload(_url(self))

    classes = [getattr(download, n) for n in ("RequestsDownload", "GoogleDriveDownload", "GoogleCloudBucketStream")]
    saved = [(cls, "stream", cls.__dict__["stream"]) for cls in classes if "stream" in cls.__dict__]
    path = download.Download.__dict__["path"]
    saved.append((download.Download, "path", path))

    def path_noting_target(self: object, force: bool = True) -> object:
        try:
            return path(self, force)
        except Exception as exc:
            needed = _needs_download(exc)
            if needed is not None and needed.target is None:
                needed.target = getattr(self, "_cache_path", None)
            raise

    for cls, _, _ in saved[:-1]:
        cls.stream = refuse
    download.Download.path = path_noting_target
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for cls, attr, fn in saved:
            setattr(cls, attr, fn)


def _needs_download(exc: BaseException) -> _NeedsDownload | None:
    """The refused download behind `exc` (ir_datasets wraps several mirrors' failures in one error)."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, _NeedsDownload):
            return e
        if isinstance(e, BaseException):
            todo += [e.__cause__, e.__context__, *e.args]
        elif isinstance(e, (list, tuple)):
            todo += list(e)
    return None


def _home() -> str:
    from ir_datasets import util

    return str(util.home_path())


def _children(irds: ModuleType, dataset_id: str) -> list[str]:
    prefix = dataset_id.rstrip("/") + "/"
    return sorted(n for n in irds.registry if n.startswith(prefix))[:5]


def _text(record: object, field: str = "text") -> str:
    value = getattr(record, field, None)
    if value is None and hasattr(record, "default_text"):
        value = record.default_text()
    return "" if value is None else str(value)


def _read_corpus(ds: Any, join_rule: str, name: str) -> Corpus:
    """One pass over `docs_iter()` into the three columns a Corpus holds."""
    ids: list[str] = []
    titles: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    fields = getattr(ds.docs_cls(), "_fields", ())
    titled = "title" in fields and "text" in fields
    for doc in ds.docs_iter():
        doc_id = str(doc.doc_id)
        if doc_id in seen:
            raise InputError(f"duplicate document id {doc_id!r}", path=name, field="doc_id")
        seen.add(doc_id)
        ids.append(doc_id)
        titles.append(str(doc.title or "") if titled else "")
        texts.append(str(doc.text or "") if titled else _text(doc))
    if not ids:
        raise InputError("corpus is empty (no documents)", path=name)
    return Corpus(ids, texts, titles, None, join_rule=join_rule, name=name)


def _read_queries(ds: Any, name: str) -> Queries:
    texts: dict[str, str] = {}
    for q in ds.queries_iter():
        qid = str(q.query_id)
        if qid in texts:
            raise InputError(f"duplicate query id {qid!r}", path=name, field="query_id")
        texts[qid] = _text(q)
    return Queries(texts)


def _read_qrels(ds: Any, name: str) -> tuple[Qrels, int, bool]:
    """(qrels, repeated judgements, by subtopic?). Subtopic qrels (ir_datasets' TrecSubQrel: one grade per
    query, doc and subtopic, as the TREC Web track's diversity qrels) collapse to a doc's best grade over its
    subtopics, as retbench's own subtopic reader's plain view does; plain qrels keep a repeated pair's last
    grade, as trec_eval does."""
    judgements: dict[str, dict[str, int]] = {}
    repeated, by_subtopic = 0, False
    for row, qrel in enumerate(ds.qrels_iter()):
        try:
            grade = checked_grade(qrel.relevance)
        except ValueError as exc:
            raise InputError(str(exc), path=name, field=f"qrels[{row}].relevance") from None
        docs = judgements.setdefault(str(qrel.query_id), {})
        doc = str(qrel.doc_id)
        if getattr(qrel, "subtopic_id", None) is not None:
            by_subtopic = True
            docs[doc] = max(grade, docs.get(doc, grade))
            continue
        repeated += doc in docs
        docs[doc] = grade
    return Qrels(judgements), repeated, by_subtopic


def _open(dataset_id: str, parts: tuple[str, ...]) -> Any:
    """`ir_datasets.load(id)`, refused with the ids it has near it when it lacks one of `parts`."""
    try:
        import ir_datasets
    except ImportError:
        raise InputError(
            "ir_datasets is not installed: pip install 'retbench[irds]'", path=PREFIX + dataset_id, field="dataset"
        ) from None
    try:
        ds = ir_datasets.load(dataset_id)
    except KeyError:
        raise InputError(
            f"ir_datasets has no dataset {dataset_id!r}", path=PREFIX + dataset_id, field="dataset"
        ) from None
    lacks = [part for part in parts if not getattr(ds, f"has_{part}")()]
    if lacks:
        near = _children(ir_datasets, dataset_id)
        hint = f" (try {', '.join(PREFIX + n for n in near)})" if near else ""
        raise InputError(
            f"ir_datasets dataset {dataset_id!r} has no {' or '.join(lacks)}: name one with {' and '.join(parts)}{hint}",
            path=PREFIX + dataset_id,
            field="dataset",
        )
    return ds


@contextlib.contextmanager
def _reading(dataset_id: str) -> Iterator[None]:
    """Read with downloads refused, and turn what ir_datasets raises into one line a person can act on."""
    name = PREFIX + dataset_id
    try:
        with _no_downloads():
            yield
    except InputError:
        raise
    except FileNotFoundError as exc:  # a local file of a registered dataset (ir_datasets' LocalDownload)
        raise InputError(
            f"ir_datasets needs the file {exc.filename or exc}, which is not there (ir_datasets' home is {_home()}; "
            "a corpus you obtain yourself is described on its page at ir-datasets.com)",
            path=name,
            field="dataset",
        ) from None
    except Exception as exc:
        needed = _needs_download(exc)
        if needed is None:
            raise InputError(
                f"ir_datasets could not read {dataset_id!r} ({type(exc).__name__}: {exc})", path=name, field="dataset"
            ) from None
        where = f"at {needed.target}" if needed.target else f"under {_home()}"
        raise InputError(
            f"ir_datasets needs to download {needed.url} for {dataset_id!r}, and retbench does not download: put "
            f"that file {where} (ir_datasets' home is {_home()}; set IR_DATASETS_HOME to use another) or set "
            f"{DOWNLOAD_ENV}=1 on a machine with network",
            path=name,
            field="dataset",
        ) from None


def load_irds(
    dataset_id: str, splits: list[str] | None = None, *, strict: bool = False, join_rule: str = "title_space_text"
) -> Dataset:
    """A dataset read through ir_datasets (`dataset_id` without the `irds:` prefix); its qrels are one split."""
    name = PREFIX + dataset_id
    if splits is not None and len(splits) != 1:
        raise InputError(
            "an ir_datasets id names one set of queries and qrels: give one split (one id per split)",
            path=name,
            field="split",
        )
    with _reading(dataset_id):
        ds = _open(dataset_id, ("docs", "queries", "qrels"))
        corpus = _read_corpus(ds, join_rule, name)
        queries = _read_queries(ds, name)
        qrels, repeated, by_subtopic = _read_qrels(ds, name)
    problems = [f"qrels: {repeated} repeated judgement(s); the last grade was kept"] if repeated else []
    if by_subtopic:
        problems.append("qrels: judged per subtopic; each document keeps its best grade over its subtopics")
    problems += check_qrels(qrels, corpus, queries, name + " qrels", strict=strict)
    return Dataset(name, corpus, queries, {splits[0] if splits else "test": qrels}, path=name, problems=problems)


def read_irds_qrels(dataset_id: str) -> Qrels:
    """Only the qrels of an ir_datasets dataset (what `retbench eval irds:<id> RUN` scores against)."""
    with _reading(dataset_id):
        qrels, _, _ = _read_qrels(_open(dataset_id, ("qrels",)), PREFIX + dataset_id)
    return qrels
