"""Corpora, queries, golden samples and datasets: the inputs every study reads."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from retbench.data.qrels import Qrels
from retbench.errors import InputError
from retbench.jsontypes import JSONObject, JSONValue

# because it changes scores: BEIR joins "title text" with one space and strips the result.
JOIN_RULES = ("title_space_text", "title_newline_text", "text_only")


def join_title_text(title: str, text: str, rule: str = "title_space_text") -> str:
    """Join a title and a text by a named rule (BEIR's own rule is the default)."""
    if rule == "text_only":
        return text
    if rule == "title_space_text":
        return (title + " " + text).strip()
    if rule == "title_newline_text":
        return (title + "\n" + text).strip()
    raise ValueError(f"unknown join rule {rule!r}; expected one of {', '.join(JOIN_RULES)}")


@dataclass(frozen=True)
class Document:
    """One document (or chunk) of a corpus."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)


class Corpus:
    """Documents by id, stored as parallel columns.

    Columns may be any sequence (lists, or Arrow-backed lazy columns from `io.hf`) so a corpus of
    millions of documents need not be materialized as Python objects.
    """

    def __init__(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        titles: Sequence[str] | None = None,
        metadata: Sequence[Mapping[str, JSONValue]] | None = None,
        *,
        join_rule: str = "title_space_text",
        name: str = "",
    ) -> None:
        if titles is not None and len(titles) != len(ids):
            raise ValueError("titles and ids differ in length")
        if len(texts) != len(ids):
            raise ValueError("texts and ids differ in length")
        if join_rule not in JOIN_RULES:
            raise ValueError(f"unknown join rule {join_rule!r}; expected one of {', '.join(JOIN_RULES)}")
        self.ids = ids
        self.texts = texts
        self.titles = titles
        self.metadata = metadata
        self.join_rule = join_rule
        self.name = name
        self._index: dict[str, int] | None = None

    @classmethod
    def from_documents(cls, docs: Iterable[Document], *, join_rule: str = "title_space_text", name: str = "") -> Corpus:
        docs = list(docs)
        return cls(
            [d.id for d in docs],
            [d.text for d in docs],
            [d.title for d in docs],
            [dict(d.metadata) for d in docs],
            join_rule=join_rule,
            name=name,
        )

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def index(self) -> dict[str, int]:
        """Position of each id; built on first use."""
        if self._index is None:
            self._index = {doc_id: i for i, doc_id in enumerate(self.ids)}
        return self._index

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.index

    def title(self, i: int) -> str:
        return self.titles[i] if self.titles is not None else ""

    def document(self, i: int) -> Document:
        meta = self.metadata[i] if self.metadata is not None else {}
        return Document(self.ids[i], self.texts[i], self.title(i), meta or {})

    def __getitem__(self, doc_id: str) -> Document:
        return self.document(self.index[doc_id])

    def __iter__(self) -> Iterator[Document]:
        for i in range(len(self)):
            yield self.document(i)

    def joined(self, i: int) -> str:
        """The text that gets indexed for document i, by this corpus's join rule."""
        return join_title_text(self.title(i), self.texts[i], self.join_rule)

    def joined_texts(self) -> list[str]:
        return [self.joined(i) for i in range(len(self))]

    def joined_batches(self, size: int = 8192) -> Iterator[list[str]]:
        """The indexed texts a batch at a time, so an index can be fed without a list of every text."""
        for start in range(0, len(self), size):
            end = min(start + size, len(self))
            texts = self.texts[start:end]  # one slice per column: Arrow columns convert a batch at once
            titles = self.titles[start:end] if self.titles is not None else [""] * len(texts)
            yield [join_title_text(t, x, self.join_rule) for t, x in zip(titles, texts, strict=True)]

    def subset(self, ids: Iterable[str]) -> Corpus:
        """A corpus of the given ids, in the given order."""
        pos = [self.index[i] for i in ids]
        return Corpus(
            [self.ids[p] for p in pos],
            [self.texts[p] for p in pos],
            [self.title(p) for p in pos],
            [self.metadata[p] for p in pos] if self.metadata is not None else None,
            join_rule=self.join_rule,
            name=self.name,
        )

    def fingerprint(self) -> str:
        """Content hash of ids, titles and texts: two corpora with equal fingerprints index the same."""
        h = hashlib.sha256()
        h.update(self.join_rule.encode())
        for i in range(len(self)):
            for part in (self.ids[i], self.title(i), self.texts[i]):
                h.update(part.encode("utf-8"))
                h.update(b"\x1f")
            h.update(b"\x1e")
        return h.hexdigest()[:16]


class Queries(Mapping[str, str]):
    """Query id -> query text, in file order, with optional per-query metadata."""

    def __init__(
        self,
        texts: Mapping[str, str],
        metadata: Mapping[str, Mapping[str, JSONValue]] | None = None,
    ) -> None:
        self._texts = dict(texts)
        self.metadata: dict[str, Mapping[str, JSONValue]] = dict(metadata or {})

    def __getitem__(self, qid: str) -> str:
        return self._texts[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    @property
    def ids(self) -> list[str]:
        return list(self._texts)

    def subset(self, ids: Iterable[str]) -> Queries:
        ids = [i for i in ids if i in self._texts]
        return Queries({i: self._texts[i] for i in ids}, {i: self.metadata[i] for i in ids if i in self.metadata})


@dataclass
class Sample:
    """One golden-set case: a question, its relevant ids (with gains), and options.

    `expected` maps doc id -> gain; a list of ids in the file becomes gain 1 each.
    `support_groups` lists the groups of ids a multi-hop question needs (recall_all).
    `answers` are the reference answers (`answer` is the first), `negative_answers` known-wrong ones;
    `answerable` False marks a question the corpus cannot answer (a system should abstain).
    `recency_conflict_rule` (`cite_newer`, `cite_both`, `acknowledge_both`) marks a question whose
    supports conflict; `expected` then lists them oldest first (the last is the newer note).
    """

    id: str
    input: str
    expected: dict[str, int]
    k: int | None = None
    tags: list[str] = field(default_factory=list)
    category: str | None = None
    answer: str | None = None
    support_groups: list[list[str]] | None = None
    metadata: JSONObject = field(default_factory=dict)
    answerable: bool | None = None
    answers: list[str] = field(default_factory=list)
    negative_answers: list[str] = field(default_factory=list)
    recency_conflict_rule: str | None = None

    def __post_init__(self) -> None:
        if self.answer and not self.answers:
            self.answers = [self.answer]


@dataclass
class Dataset:
    """A corpus with its queries and per-split judgements, and what loading noticed about it."""

    name: str
    corpus: Corpus
    queries: Queries
    qrels: dict[str, Qrels]
    path: str = ""
    problems: list[str] = field(default_factory=list)
    samples: dict[str, Sample] = field(default_factory=dict)  # a golden set's samples (answers, answerable)

    def split(self, split: str) -> Qrels:
        if split not in self.qrels:
            have = ", ".join(sorted(self.qrels)) or "none"
            raise InputError(f"no qrels split {split!r} (have: {have})", path=self.path, field="split")
        return self.qrels[split]
