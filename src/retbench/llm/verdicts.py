"""Structured judge answers: find the model's final JSON object, validate it, or say why it cannot be used.

A verdict is either a validated value or a status. Statuses (never numbers): `judge_error` (the call
failed), `judge_timeout` (it timed out), `judge_overlong` (a reply too long to be an answer: see
`llm.client.MAX_REPLY_CHARS`), `unparseable` (an answer came back but holds no valid verdict). Counted
as "judged N of M" wherever verdicts are summarised.

The rule every parser here follows: the verdict is the model's final answer, the LAST top-level JSON
object in its reply (objects nested inside another, or inside a JSON string, are part of that one).
Judged passages are untrusted text: a passage that carries `{"grade": 3}` and is quoted back by the
model comes before the model's own verdict, so reading the first object would let the passage grade
itself. When the final object does not hold a valid verdict the answer is `unparseable`; an earlier
object is never taken instead. A reply with no JSON object at all is accepted only where it is
unambiguous (a bare integer grade). Numbers must be finite: `NaN` and `Infinity` (which Python's JSON
reader accepts) are no grade.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from retbench.jsontypes import JSONObject

STATUSES = ("ok", "judge_error", "judge_timeout", "judge_overlong", "unparseable")


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object embedded in `text`, in order (models wrap JSON in prose or code fences)."""
    for _, obj in located_objects(text):
        yield obj


def located_objects(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(start offset, object) of every top-level JSON object embedded in `text`, in order."""
    decoder = json.JSONDecoder()
    pos = 0
    while (start := text.find("{", pos)) >= 0:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if isinstance(obj, dict):
            yield start, obj
        pos = max(end, start + 1)


def final_object(text: str) -> dict[str, Any] | None:
    """The model's final answer: the last top-level JSON object of the reply (module docstring)."""
    last = None
    for obj in json_objects(text):
        last = obj
    return last


def _integer(value: object) -> int | None:
    """An integer grade: 2, 2.0 or "2"; None for 1.5, NaN, Infinity, booleans and anything else."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        return None
    return int(value)


def parse_grade(text: str, key: str = "grade", low: int = 0, high: int = 3) -> tuple[int | None, str]:
    """`{"grade": N}` with N an integer in [low, high] -> (N, "ok"); else (None, "unparseable").

    Reads the final JSON object only (module docstring). A bare integer answer ("2") is accepted
    too: it is unambiguous. Anything else is not guessed at.
    """
    obj = final_object(text)
    if obj is not None:
        value = _integer(obj.get(key))
        return (value, "ok") if value is not None and low <= value <= high else (None, "unparseable")
    bare = text.strip().strip("`").strip()
    if bare.isdigit() and low <= int(bare) <= high:
        return int(bare), "ok"
    return None, "unparseable"


def parse_fields(text: str, required: tuple[str, ...]) -> tuple[dict[str, str] | None, str]:
    """The final JSON object, when its `required` fields are all non-empty strings; else unparseable."""
    obj = final_object(text) or {}
    if all(isinstance(obj.get(f), str) and obj[f].strip() for f in required):
        return {f: obj[f].strip() for f in required}, "ok"
    return None, "unparseable"


# -- the judged answer metrics' verdicts (metrics/judged.py) --------------------------------------------
def _flag(value: object) -> bool | None:
    """1/0, true/false, "yes"/"no" -> bool; anything else None (never guessed)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "yes", "no", "true", "false"):
        return value.strip().lower() in ("1", "yes", "true")
    return None


def parse_flag(text: str, key: str) -> tuple[bool | None, str]:
    """`{key: 1}` / `{key: 0}` (or true/false, "yes"/"no") -> (bool, "ok"); else (None, "unparseable")."""
    flag = _flag((final_object(text) or {}).get(key))
    return (flag, "ok") if flag is not None else (None, "unparseable")


def parse_strings(text: str, key: str, allow_empty: bool = True) -> tuple[list[str] | None, str]:
    """`{key: ["...", ...]}` -> (the non-blank strings, "ok"); a list holding a non-string is unparseable."""
    items = (final_object(text) or {}).get(key)
    if isinstance(items, list) and all(isinstance(s, str) for s in items):
        kept = [s.strip() for s in items if s.strip()]
        if kept or allow_empty:
            return kept, "ok"
    return None, "unparseable"


def parse_flags(text: str, key: str = "verdicts") -> tuple[list[bool] | None, str]:
    """`{key: [1, 0, ...]}` -> ([True, False, ...], "ok"); an item that is not a verdict makes it unparseable.

    Items may also be objects carrying the verdict (`{"verdict": 1}` or `{"supported": true}`), a shape
    models often choose; the caller checks the length against the statements it sent.
    """
    items = (final_object(text) or {}).get(key)
    if not isinstance(items, list):
        return None, "unparseable"
    flags = [_flag(i.get("verdict", i.get("supported")) if isinstance(i, dict) else i) for i in items]
    if all(f is not None for f in flags):
        return [bool(f) for f in flags], "ok"
    return None, "unparseable"


def parse_scored(text: str, lists: tuple[str, ...] = (), strings: tuple[str, ...] = ()) -> tuple[dict | None, str]:
    """`{"score": 0-5, <lists>: [str...], <strings>: str}` -> (that dict, "ok"); missing lists count as empty.

    The score must be an integer from 0 to 5; a named string field must be present (it may be empty).
    """
    obj = final_object(text) or {}
    score = _integer(obj.get("score"))
    if score is None or not 0 <= score <= 5:
        return None, "unparseable"
    out: JSONObject = {"score": score}
    ok = True
    for name in lists:
        items = obj.get(name, [])
        ok = ok and isinstance(items, list) and all(isinstance(s, str) for s in items)
        out[name] = [s.strip() for s in items if isinstance(s, str) and s.strip()] if isinstance(items, list) else []
    for name in strings:
        ok = ok and isinstance(obj.get(name), str)
        out[name] = str(obj.get(name, "")).strip()
    return (out, "ok") if ok else (None, "unparseable")
