"""Golden sets of samples (YAML or JSONL):

A sample:

    - id: q-1
      input: { question: "What is our refund window?" }
      expected_output: ["doc-3", "doc-9"]          # binary relevance, or {"doc-3": 3, "doc-9": 1}
      metadata: { k: 5, tags: [billing], category: factual,
                  answer: "30 days", required_support_groups: [["doc-3"], ["doc-9"]] }

The answer side (RAG): `metadata.answer` is one reference answer or a list of them (`answers:` is
the same), `metadata.negative_answers` lists known-wrong answers (negative references), and
`answerable: false` (top level or in metadata) marks a question the corpus cannot answer; such a
sample may leave out `expected_output` (nothing supports an answer). `recency_conflict_rule`
(top level or in metadata: `cite_newer`, `cite_both` or `acknowledge_both`) marks a question whose
notes conflict; its `expected_output` lists the conflicting notes oldest first, so the last is the
newer one (the `recency_conflict` answer metric reads that order).

System outputs in the same format are read by `io/outputs.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypedDict

import yaml

from retbench.data import Dataset, Qrels, Queries, Sample
from retbench.data.qrels import checked_grade
from retbench.errors import InputError
from retbench.io.files import iter_jsonl, load_yaml_text, open_text, require_file


class _LineLoader(yaml.SafeLoader):
    """A YAML loader that remembers the line each mapping starts on, for error messages."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[object, object]:
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping  # type: ignore[return-value]


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _strip_lines(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _strip_lines(v) for k, v in obj.items() if k != "__line__"}
    if isinstance(obj, list):
        return [_strip_lines(v) for v in obj]
    return obj


def _load_records(path: Path, key: str) -> Iterator[tuple[int | None, object]]:
    """(line, record) from a JSONL file, or from a YAML/JSON file holding a list or `{key: [...]}`."""
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        yield from iter_jsonl(path)
        return
    require_file(path)
    with open_text(path) as fh:
        doc = load_yaml_text(fh.read(), path, _LineLoader)
    if isinstance(doc, dict) and key in doc:
        doc = doc[key]
    if not isinstance(doc, list):
        raise InputError(f"expected a list of records or a mapping with a '{key}' list", path=path, field=key)
    for rec in doc:
        line = rec.get("__line__") if isinstance(rec, dict) else None
        yield line, _strip_lines(rec)


def _expected(value: object, path: Path, line: int | None) -> dict[str, int]:
    if isinstance(value, list):
        if not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
            raise InputError(
                "a list of expected ids must hold only ids (strings)", path=path, line=line, field="expected_output"
            )
        return {str(v): 1 for v in value}
    if isinstance(value, dict):
        out = {}
        for doc, gain in value.items():
            try:
                if isinstance(gain, str):  # a gain is a number in the file, not its text
                    raise ValueError(f"grade must be an integer, got {gain!r:.40}")
                out[str(doc)] = checked_grade(gain)
            except ValueError as exc:
                raise InputError(
                    f"gain for {doc!r:.40} {str(exc).removeprefix('grade ')}",
                    path=path,
                    line=line,
                    field="expected_output",
                ) from None
        return out
    raise InputError(
        f"expected_output must be a list of relevant ids or an id -> gain map, got {type(value).__name__}",
        path=path,
        line=line,
        field="expected_output",
    )


def _question(value: object, path: Path, line: int | None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("question", "query", "text"):
            if isinstance(value.get(key), str):
                return value[key]
    raise InputError("input must be a string or a mapping with a 'question'", path=path, line=line, field="input")


def _texts(value: object, path: Path, line: int | None, name: str) -> list[str]:
    """A string or a list of strings (reference answers), empty ones dropped."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    texts = [v for v in items if isinstance(v, str)]
    if len(texts) != len(items):
        raise InputError("must be a string or a list of strings", path=path, line=line, field=name)
    return [v for v in texts if v.strip()]


class _AnswerSide(TypedDict):
    """The answer-side fields of a `Sample`, as one golden record gives them."""

    answerable: bool | None
    answer: str | None
    answers: list[str]
    negative_answers: list[str]
    recency_conflict_rule: str | None


def _answer_side(rec: Mapping[str, object], meta: Mapping[str, object], p: Path, line: int | None) -> _AnswerSide:
    """answerable, reference answers and negative answers of one sample record."""
    answerable = rec.get("answerable", meta.get("answerable"))
    if answerable is not None and not isinstance(answerable, bool):
        raise InputError(
            f"answerable must be true or false, got {answerable!r:.40}", path=p, line=line, field="answerable"
        )
    answers = _texts(meta.get("answer", rec.get("answer")), p, line, "metadata.answer")
    answers += [a for a in _texts(meta.get("answers"), p, line, "metadata.answers") if a not in answers]
    if answerable is False and answers:
        raise InputError("an unanswerable sample has no reference answer", path=p, line=line, field="metadata.answer")
    negatives = _texts(meta.get("negative_answers"), p, line, "metadata.negative_answers")
    return {
        "answerable": answerable,
        "answer": answers[0] if answers else None,
        "answers": answers,
        "negative_answers": negatives,
        "recency_conflict_rule": _recency_rule(rec, meta, answerable, p, line),
    }


RECENCY_RULES = ("cite_newer", "cite_both", "acknowledge_both")


def _recency_rule(
    rec: Mapping[str, object], meta: Mapping[str, object], answerable: bool | None, p: Path, line: int | None
) -> str | None:
    """`recency_conflict_rule` (top level or in metadata): one of RECENCY_RULES, on a sample with two or
    more supports (`expected_output` lists the conflicting notes oldest first)."""
    name = "recency_conflict_rule" if "recency_conflict_rule" in rec else "metadata.recency_conflict_rule"
    rule = rec.get("recency_conflict_rule", meta.get("recency_conflict_rule"))
    if rule is None:
        return None
    if rule not in RECENCY_RULES:
        raise InputError(f"must be one of {', '.join(RECENCY_RULES)}, got {rule!r:.40}", path=p, line=line, field=name)
    expected = rec.get("expected_output")
    if answerable is False or not isinstance(expected, (list, dict)) or len(expected) < 2:
        raise InputError(
            "a recency conflict needs an answerable sample whose expected_output lists the conflicting notes, "
            "oldest first (two or more)",
            path=p,
            line=line,
            field=name,
        )
    return str(rule)


def read_golden(path: str | Path) -> list[Sample]:
    """Read a golden set; ids must be unique and every sample needs `input` and `expected_output`."""
    p = Path(path)
    samples: list[Sample] = []
    seen: set[str] = set()
    for line, rec in _load_records(p, "samples"):
        if not isinstance(rec, dict):
            raise InputError(f"a sample must be a mapping, got {type(rec).__name__}", path=p, line=line)
        if "id" not in rec:
            raise InputError("missing required field", path=p, line=line, field="id")
        sid = str(rec["id"])
        if sid in seen:
            raise InputError(f"duplicate sample id {sid!r}", path=p, line=line, field="id")
        seen.add(sid)
        if rec.get("review") == "reject":  # a person rejected this (synthetic) sample: it is not evaluated
            continue
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise InputError("metadata must be a mapping", path=p, line=line, field="metadata")
        side = _answer_side(rec, meta, p, line)
        if side["answerable"] is False:
            rec.setdefault("expected_output", [])
        for req in ("input", "expected_output"):
            if req not in rec:
                raise InputError("missing required field", path=p, line=line, field=req)
        k = meta.get("k")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
            raise InputError(f"k must be a positive integer, got {k!r}", path=p, line=line, field="metadata.k")
        groups = meta.get("required_support_groups")
        if groups is not None and not (isinstance(groups, list) and all(isinstance(g, list) for g in groups)):
            raise InputError(
                "must be a list of lists of ids", path=p, line=line, field="metadata.required_support_groups"
            )
        tags = rec.get("tags", meta.get("tags", []))
        samples.append(
            Sample(
                id=sid,
                input=_question(rec["input"], p, line),
                expected=_expected(rec["expected_output"], p, line),
                k=k,
                tags=[str(t) for t in (tags if isinstance(tags, list) else [tags])],
                category=meta.get("category"),
                support_groups=[[str(x) for x in g] for g in groups] if groups else None,
                metadata=meta,
                **side,
            )
        )
    if not samples:
        raise InputError("golden set holds no samples", path=p)
    return samples


def read_golden_dataset(folder: str | Path, *, join_rule: str = "title_space_text", name: str = "") -> Dataset:
    """A golden-set folder: `corpus.jsonl` (BEIR corpus lines) and `golden.yaml`; one split, `test`.

    Unanswerable samples come with empty judgements, so they stay in the split; every expected id
    must be a corpus document.
    """
    from retbench.io.beir import read_corpus

    p = Path(folder)
    corpus = read_corpus(p / "corpus.jsonl", join_rule=join_rule, name=name)
    samples = read_golden(p / "golden.yaml")
    for s in samples:
        unknown = [d for d in s.expected if d not in corpus]
        if unknown:
            raise InputError(
                f"sample {s.id!r} expects {unknown[0]!r}, which is not in corpus.jsonl",
                path=p / "golden.yaml",
                field="expected_output",
            )
    return Dataset(
        name or p.name,
        corpus,
        golden_queries(samples),
        {"test": golden_qrels(samples)},
        str(p),
        samples={s.id: s for s in samples},
    )


def golden_qrels(samples: list[Sample]) -> Qrels:
    return Qrels({s.id: s.expected for s in samples})


def golden_queries(samples: list[Sample]) -> Queries:
    return Queries({s.id: s.input for s in samples})
