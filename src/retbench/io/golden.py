"""Golden sets of samples (YAML or JSONL) and system outputs in the golden-set format:

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

System outputs: `{"id": "q-1", "retrieved": [{"id": "doc-7", "text": "..."}, ...]}` per JSONL line, or a
bare array of ids (`{"id": "q-1", "retrieved": ["doc-7", "doc-3"]}` or a mapping `{"q-1": [...]}`).
A record may also carry `answer`, `references`, `abstained` and `latency` (see `io/answers.py`).
Eval harnesses write a sample's system output as `actualOutput` (or `actual_output`, `output`), often as
JSON text: `{"id": "q-1", "actualOutput": "[\"doc-7\", \"doc-3\"]"}` or `"{\"retrieved\": [...]}"`. Those
fields are read beside `retrieved` (the first present of `retrieved`, `actualOutput`, `actual_output`,
`output` wins), as an object, a bare array, or JSON text holding either; text that is not JSON is refused
naming the record (file:line) and the field. An output object decoded from such text may carry the answer
side itself when the record does not. A record holding `retrieved` and a harness field keeps both: the harness
field is then the answer (`io.answers.answer_beside_ranking`). A sample id given twice (two JSONL records, a
JSON key written twice) is refused naming both, since which output is the system's cannot be told.
Outputs are ranked lists, rank 1 first; their scores become n, n-1, ... so the order survives the
trec_eval sort unless the output gives scores of its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import yaml

from retbench.data import Dataset, Qrels, Queries, Run, RunBuilder, Sample
from retbench.data.answers import ANSWER_FIELDS, SystemAnswer
from retbench.data.ids import id_problem
from retbench.data.qrels import checked_grade
from retbench.data.status import QueryStatus
from retbench.errors import InputError
from retbench.io.answers import answer_beside_ranking, parse_answer
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


@dataclass
class SystemOutputs:
    """A system's outputs: a Run, the texts it returned (for answer containment) and its answer side."""

    run: Run
    texts: dict[str, str] = field(default_factory=dict)
    answers: dict[str, SystemAnswer] = field(default_factory=dict)


#: where a record keeps its system output, first present wins: the golden-set contract's own field, then the
#: names eval harnesses write (`actualOutput` in JSON test cases, `actual_output` in Python ones)
OUTPUT_FIELDS = ("retrieved", "actualOutput", "actual_output", "output")


def _decoded(value: object, path: Path | str, line: int | None, name: str) -> object:
    """An output given as JSON text (as harnesses store it), decoded; any other value as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"output text is not JSON ({exc.msg} at character {exc.pos}): {value!r:.60}",
            path=path,
            line=line,
            field=name,
        ) from None


def record_output(
    rec: Mapping[str, object], path: Path | str, line: int | None
) -> tuple[object, Mapping[str, object], str]:
    """(the output a record carries, where its answer side is, the field it came from).

    The output is the first of `OUTPUT_FIELDS` present, JSON text decoded (the record itself when none is,
    an answer-only output); the answer side is the record, or the decoded output object when only it has one.
    """
    name = next((f for f in OUTPUT_FIELDS if f in rec), None)
    if name is None:
        return rec, rec, "retrieved"
    if name == "retrieved":
        harness = next((f for f in OUTPUT_FIELDS[1:] if f in rec), None)
        if harness is not None:
            return rec["retrieved"], answer_beside_ranking(rec, harness, path, line), name
    value = _decoded(rec[name], path, line, name)
    if isinstance(value, dict) and not any(f in rec for f in ANSWER_FIELDS):
        return value, value, name
    return value, rec, name


def parse_ranking(
    value: object, path: Path | str, line: int | None, texts: dict[str, str], name: str = "retrieved"
) -> list[tuple[str, float]]:
    """One output in the input contract -> ranking (rank order kept); texts it carries go into `texts`."""
    if isinstance(value, dict) and "retrieved" in value:
        value = value["retrieved"]
    elif isinstance(value, dict) and any(f in value for f in ANSWER_FIELDS):
        value = []  # an answer-only output (an end-to-end RAG system that returns no ranked list)
    if not isinstance(value, list):
        raise InputError("output must be a list or {'retrieved': [...]}", path=path, line=line, field=name)
    n = len(value)
    ranking = []
    for rank, item in enumerate(value):
        if isinstance(item, dict):
            if "id" not in item:
                raise InputError(f"retrieved item {rank + 1} has no id", path=path, line=line, field="retrieved.id")
            problem = id_problem(item["id"])
            if problem:
                raise InputError(f"retrieved item {rank + 1}: {problem}", path=path, line=line, field="retrieved.id")
            doc = str(item["id"])
            if isinstance(item.get("text"), str):
                texts.setdefault(doc, item["text"])
            score = item.get("score")
            if isinstance(score, bool) or (score is not None and not isinstance(score, (int, float))):
                raise InputError(
                    f"retrieved item {rank + 1}: score must be a number, got {score!r:.40}",
                    path=path,
                    line=line,
                    field="retrieved.score",
                )
            value = float(n - rank) if score is None else float(score)
            if not math.isfinite(value):
                raise InputError(
                    f"retrieved item {rank + 1}: score must be finite, got {score!r}",
                    path=path,
                    line=line,
                    field="retrieved.score",
                )
            ranking.append((doc, value))
        elif isinstance(item, (str, int)) and not isinstance(item, bool):
            problem = id_problem(item)
            if problem:
                raise InputError(f"retrieved item {rank + 1}: {problem}", path=path, line=line, field="retrieved")
            ranking.append((str(item), float(n - rank)))
        else:
            raise InputError(
                f"retrieved item {rank + 1} must be an id or an object with 'id'",
                path=path,
                line=line,
                field="retrieved",
            )
    return ranking


def _add_output(
    builder: RunBuilder,
    answers: dict[str, SystemAnswer],
    qid: str,
    ranking: list[tuple[str, float]],
    answer: SystemAnswer | None,
) -> None:
    """One output record into the run; a record whose `error` says the system failed is a failed query
    (status `error`, counted and scored as one), never an empty answer."""
    if answer is None:
        builder.add(qid, ranking)
        return
    answers[qid] = answer
    failed = answer.error is not None
    builder.add(qid, ranking, status=QueryStatus.ERROR if failed else None, error=answer.error)


def _unique_keys(pairs: list[tuple[str, object]], path: Path) -> dict[str, object]:
    """A JSON object whose keys are each written once (json keeps the last of a repeated key silently)."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"{key!r:.40} is given twice (json would keep the last silently): keep one", path=path)
        out[key] = value
    return out


def read_outputs(path: str | Path, name: str | None = None) -> SystemOutputs:
    """Read system outputs: JSONL of `{"id", "retrieved"}` records, or a JSON/YAML mapping id -> output."""
    p = Path(path)
    builder = RunBuilder(name or p.stem)
    texts: dict[str, str] = {}
    answers: dict[str, SystemAnswer] = {}
    if p.name.endswith((".jsonl", ".jsonl.gz")):
        first: dict[str, int] = {}  # id -> the line of its record
        for line, rec in iter_jsonl(p):
            if "id" not in rec:
                raise InputError("missing required field", path=p, line=line, field="id")
            if id_problem(rec["id"]):
                raise InputError(str(id_problem(rec["id"])), path=p, line=line, field="id")
            if first.setdefault(str(rec["id"]), line) != line:  # which record is the system's output is unknowable
                raise InputError(
                    f"a second output for sample {str(rec['id'])!r} (the first is on line {first[str(rec['id'])]}): "
                    "keep one",
                    path=p,
                    line=line,
                    field="id",
                )
            value, side, where = record_output(rec, p, line)
            ranking = parse_ranking(value, p, line, texts, where)
            _add_output(builder, answers, str(rec["id"]), ranking, parse_answer(side, p, line))
    else:
        require_file(p)
        with open_text(p) as fh:
            try:
                doc = (
                    json.load(fh, object_pairs_hook=lambda pairs: _unique_keys(pairs, p))
                    if p.suffix == ".json"
                    else load_yaml_text(fh.read(), p)
                )
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed file ({exc})", path=p) from None
        if not isinstance(doc, dict):
            raise InputError("expected a mapping of sample id -> output", path=p)
        for sid, value in doc.items():
            if id_problem(sid):
                raise InputError(str(id_problem(sid)), path=p, field=f"{sid!r:.40}")
            carrier: object
            carrier = value = _decoded(value, p, None, str(sid))
            if isinstance(value, dict):
                value, carrier, _ = record_output(value, p, None)
            ranking = parse_ranking(value, p, None, texts)
            answer = parse_answer(carrier, p, None) if isinstance(carrier, dict) else None
            _add_output(builder, answers, str(sid), ranking, answer)
    return SystemOutputs(builder.build(), texts, answers)
