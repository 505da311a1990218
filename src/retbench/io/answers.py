"""The answer side of one system output record (beside `retrieved`), read with file:line/field errors.

    {"id": "q-1", "retrieved": [...], "answer": "30 days", "references": ["doc-3"],
     "abstained": false, "latency": {"retrieval": 0.08, "generation": 1.2}}

`references` holds cited ids or anchors: strings, or objects with an `id`, or objects with `rel_path`
(and `heading_path`, a string `A > B` or a list), which become the anchor string `rel_path > A > B`.
`latency` maps a stage name to seconds; `error` says why no answer was produced (the query is then a failed one,
status `error`, scoring each metric's worst value). Every field is optional; a record with none of them has no
answer side.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from retbench.chunkers.headings import normalize_heading_path
from retbench.data.answers import ANSWER_FIELDS, SystemAnswer
from retbench.errors import InputError


def _reference(item: object, n: int, path: Path | str, line: int | None) -> str:
    if isinstance(item, (str, int)) and not isinstance(item, bool):
        return str(item)
    if isinstance(item, Mapping):
        if isinstance(item.get("id"), (str, int)) and not isinstance(item.get("id"), bool):
            return str(item["id"])
        if isinstance(item.get("rel_path"), str):
            return " > ".join((item["rel_path"], *normalize_heading_path(item.get("heading_path") or ())))
    raise InputError(
        f"reference {n} must be an id, {{'id': ...}} or {{'rel_path', 'heading_path'}}, got {item!r:.60}",
        path=path,
        line=line,
        field="references",
    )


def parse_answer(rec: Mapping[str, object], path: Path | str, line: int | None) -> SystemAnswer | None:
    """The SystemAnswer a record carries (None when it has no answer field); bad fields raise InputError."""
    if not any(f in rec for f in ANSWER_FIELDS):
        return None
    text = rec.get("answer")
    if text is not None and not isinstance(text, str):
        raise InputError(f"answer must be a string, got {type(text).__name__}", path=path, line=line, field="answer")
    refs = rec.get("references") or []
    if not isinstance(refs, list):
        raise InputError("references must be a list", path=path, line=line, field="references")
    abstained = rec.get("abstained")
    if abstained is not None and not isinstance(abstained, bool):
        raise InputError(
            f"abstained must be true or false, got {abstained!r:.40}", path=path, line=line, field="abstained"
        )
    latency = rec.get("latency") or {}
    if not isinstance(latency, Mapping):
        raise InputError("latency must map a stage name to seconds", path=path, line=line, field="latency")
    for stage, seconds in latency.items():
        ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds)
        if not ok or seconds < 0:
            raise InputError(
                f"must be a non-negative number of seconds, got {seconds!r:.40}",
                path=path,
                line=line,
                field=f"latency.{stage}",
            )
    error = rec.get("error")
    if error is not None and not isinstance(error, str):
        raise InputError("error must be a string (why no answer was produced)", path=path, line=line, field="error")
    return SystemAnswer(
        text,
        tuple(_reference(r, n, path, line) for n, r in enumerate(refs, start=1)),
        abstained,
        {str(s): float(v) for s, v in latency.items()},
        error,
    )


def answer_beside_ranking(
    rec: Mapping[str, object], harness: str, path: Path | str, line: int | None
) -> Mapping[str, object]:
    """The answer side of a record holding `retrieved` and a harness output field (`actualOutput`, ...): both are
    kept. Harnesses store the generated answer there (deepeval's `actual_output`), so text that is not JSON is
    the answer; an object gives its answer fields. A second ranking there, or a second answer that differs
    from the record's own `answer`, is refused naming both fields: which one to score cannot be guessed."""
    raw = rec[harness]
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        value = raw
    side: dict[str, object] = dict(rec)
    if isinstance(value, dict):
        if "retrieved" in value and value["retrieved"] != rec["retrieved"]:
            value = value["retrieved"]
        else:
            for f in ANSWER_FIELDS:
                if f in value:
                    side.setdefault(f, value[f])
            return side
    if isinstance(value, list):
        if value == rec["retrieved"]:
            return side
        raise InputError(
            f"the record holds two different rankings, 'retrieved' and '{harness}': keep one",
            path=path,
            line=line,
            field=harness,
        )
    text = raw if isinstance(raw, str) else str(value)
    if side.get("answer") not in (None, text):
        raise InputError(
            f"the record holds two different answers, 'answer' and '{harness}': keep one",
            path=path,
            line=line,
            field=harness,
        )
    side["answer"] = text
    return side
