"""System outputs in the golden-set format: `{"id": "q-1", "retrieved": [{"id": "doc-7", "text": "..."}, ...]}` per JSONL line, or a
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from retbench.data import Run, RunBuilder
from retbench.data.answers import ANSWER_FIELDS, SystemAnswer
from retbench.data.ids import id_problem
from retbench.data.status import QueryStatus
from retbench.errors import InputError
from retbench.io.answers import answer_beside_ranking, parse_answer
from retbench.io.files import iter_jsonl, load_yaml_text, open_text, require_file


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
