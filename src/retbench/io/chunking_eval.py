"""Reader for a chunking evaluation set: long documents plus questions whose gold is character spans.

Layout (Chroma's chunking evaluation, shipped as `corpora/chunking_eval`):

    corpora/<doc>.md          one long document per file; its id is the file stem
    questions.jsonl           {"id", "question", "corpus_id": <doc>, "references": [{"content", "start_index", "end_index"}]}
    metadata.jsonl            optional: {"id": <doc>, "rel_path": "<folder>/<doc>.md", ...} per document

`metadata.jsonl` gives documents the metadata a scope stage filters on (retrievers/scope.py reads `rel_path`,
its folder and type); the shipped set files each document under a folder named for its source (speeches/,
papers/, encyclopedia/, chats/), so a folder selector has real folders to choose from.

Offsets are Python string indexes into the file read as UTF-8 *without* newline translation, and
`text[start_index:end_index] == content` must hold: the reader checks it, so a set whose offsets
drifted (re-saved with other line endings, say) is refused with the line and field at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retbench.chunkers import Span
from retbench.data import Corpus, Dataset, Qrels, Queries
from retbench.errors import InputError
from retbench.io.files import iter_jsonl, require_file

DOC_SUFFIXES = (".md", ".txt")
METADATA = "metadata.jsonl"  # optional, beside questions.jsonl


@dataclass
class ChunkingEval:
    """Documents, questions and their gold excerpts as spans (query id -> spans in reference order)."""

    name: str
    corpus: Corpus
    queries: Queries
    spans: dict[str, list[Span]]
    path: str = ""

    def qrels(self) -> Qrels:
        """Document-level judgements: each question's documents holding a gold excerpt, grade 1."""
        return Qrels({q: {s.doc_id: 1 for s in spans} for q, spans in self.spans.items()})

    def to_dataset(self) -> Dataset:
        return Dataset(self.name, self.corpus, self.queries, {"test": self.qrels()}, path=self.path)


def read_documents(folder: Path) -> Corpus:
    """Every `.md` / `.txt` file of a folder as one document, id = file stem, text exactly as stored."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in DOC_SUFFIXES) if folder.is_dir() else []
    if not files:
        raise InputError(f"no documents ({', '.join(DOC_SUFFIXES)} files) found", path=folder)
    texts = []
    for p in files:
        try:
            with open(p, encoding="utf-8", newline="") as fh:  # no newline translation: offsets count \r
                texts.append(fh.read())
        except UnicodeDecodeError as exc:
            raise InputError(f"not valid UTF-8 ({exc.reason})", path=p) from None
    ids = [p.stem for p in files]
    meta = read_metadata(folder.parent / METADATA, ids)
    return Corpus(ids, texts, None, meta, join_rule="text_only", name=folder.parent.name)


def read_metadata(path: Path, ids: list[str]) -> list[dict[str, Any]] | None:
    """Each document's metadata from `metadata.jsonl` (None without the file); ids must be the set's documents."""
    if not path.is_file():
        return None
    found: dict[str, dict[str, Any]] = {}
    for line, obj in iter_jsonl(path):
        doc = str(_field(obj, "id", str, path, line))
        if doc not in ids:
            raise InputError(f"unknown document {doc!r} (have: {', '.join(ids)})", path=path, line=line, field="id")
        if doc in found:
            raise InputError(f"duplicate document {doc!r}", path=path, line=line, field="id")
        if "rel_path" in obj and not isinstance(obj["rel_path"], str):
            raise InputError("expected str", path=path, line=line, field="rel_path")
        found[doc] = {k: v for k, v in obj.items() if k != "id"}
    return [found.get(d, {}) for d in ids]


def _field(obj: dict, name: str, kind: type, path: Path, line: int) -> object:
    if name not in obj:
        raise InputError("missing field", path=path, line=line, field=name)
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"expected {kind.__name__}, got {type(value).__name__}", path=path, line=line, field=name)
    return value


def read_chunking_eval(folder: str | Path, *, name: str = "") -> ChunkingEval:
    """Read a chunking set folder, checking every reference against its document."""
    folder = Path(folder)
    qpath = require_file(folder / "questions.jsonl", "questions file")
    corpus = read_documents(folder / "corpora")
    texts = dict(zip(corpus.ids, corpus.texts, strict=True))
    questions: dict[str, str] = {}
    metadata: dict[str, dict] = {}
    spans: dict[str, list[Span]] = {}
    for line, obj in iter_jsonl(qpath):
        qid = str(_field(obj, "id", str, qpath, line))
        if qid in questions:
            raise InputError(f"duplicate question id {qid!r}", path=qpath, line=line, field="id")
        question = str(_field(obj, "question", str, qpath, line))
        doc = str(_field(obj, "corpus_id", str, qpath, line))
        if doc not in texts:
            raise InputError(
                f"unknown document {doc!r} (have: {', '.join(texts)})", path=qpath, line=line, field="corpus_id"
            )
        refs: list[Any] = _field(obj, "references", list, qpath, line)  # type: ignore[assignment]
        if not refs:
            raise InputError("a question needs at least one reference", path=qpath, line=line, field="references")
        text = texts[doc]
        out = []
        for i, ref in enumerate(refs):
            where = f"references[{i}]"
            if not isinstance(ref, dict):
                raise InputError("expected an object", path=qpath, line=line, field=where)
            start = _field(ref, "start_index", int, qpath, line)
            end = _field(ref, "end_index", int, qpath, line)
            assert isinstance(start, int) and isinstance(end, int)
            if not 0 <= start < end <= len(text):
                raise InputError(
                    f"span [{start}, {end}) is outside document {doc!r} ({len(text)} chars)",
                    path=qpath,
                    line=line,
                    field=where,
                )
            if "content" in ref and text[start:end] != ref["content"]:
                raise InputError(
                    f"content differs from {doc!r}[{start}:{end}]", path=qpath, line=line, field=f"{where}.content"
                )
            out.append(Span(doc, start, end))
        questions[qid] = question
        metadata[qid] = {"corpus_id": doc}
        spans[qid] = out
    if not questions:
        raise InputError("no questions", path=qpath)
    return ChunkingEval(name or folder.name, corpus, Queries(questions, metadata), spans, path=str(folder))


def read_chunking_eval_dataset(folder: str | Path) -> Dataset:
    """The set as a plain Dataset with document-level qrels (split `test`)."""
    return read_chunking_eval(folder).to_dataset()
