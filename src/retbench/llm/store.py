"""The judge's identity, its call log and its cache.

Identity: the model id the server reports (`/v1/models`), what identifies the model behind it, the prompt
(name, version, sha256 of its text) and the settings that change an answer (temperature, seed, max tokens,
extra request fields). Its hash keys the cache, so a different model, prompt version or seed can never be
served another's verdicts. What identifies the model (`keyed_on`, said in manifests and reports):
- the sha256 of its model file: hashed here for a local file (`local:`), or as the server reports it in its
  `/v1/models` entry (`client.reported_fingerprint`); the same file answers alike on any server or port;
- else the server's base URL with the model id: two servers that report the same model id may serve
  different weights, so one's verdicts are never served as the other's.

Cache: `<cache>/judge/<identity key>.jsonl`, one line per answered input (keyed by the sha256 of
the exact messages sent). Answers that came back (parsed or not) are cached; failed calls are not,
so a re-run retries them and makes no other call.

Call log: `judge_calls.jsonl` beside the results, one line per verdict with the prompt messages,
the raw answer, the parsed verdict or status, tokens and their cost at the configured prices (0 for a
cache hit), latency, retries, and whether it was cached,
so every number can be re-judged or audited later.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.io.files import AppendLog, appended_records, json_line, write_json
from retbench.jsontypes import JSONObject


def sha256_json(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def fingerprint_file(path: str | Path, cache_dir: Path | None = None) -> str:
    """sha256 of a (large) model file; remembered by (path, size, mtime) so it is read once."""
    p = Path(path).resolve()
    st = p.stat()
    memo_key = f"{p}|{st.st_size}|{st.st_mtime_ns}"
    memo = (cache_dir / "fingerprints.json") if cache_dir else None
    known: dict[str, str] = {}
    if memo and memo.is_file():
        try:
            known = json.loads(memo.read_text())
        except ValueError:
            known = {}
    if memo_key in known:
        return known[memo_key]
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    digest = h.hexdigest()
    if memo:
        known[memo_key] = digest
        write_json(memo, known, indent=1)
    return digest


@dataclass(frozen=True)
class JudgeIdentity:
    """Who judged: recorded in every manifest and hashed into the cache key."""

    model: str
    model_file: str | None
    model_sha256: str | None
    prompt: Mapping[str, str | int]  # the prompt's describe(): name, version, id, sha256
    settings: JSONObject
    server: str | None = None  # base URL (no credentials): in the key only when no model file sha256 is known
    sha256_from: str | None = None  # "model file" (hashed here) or "server" (reported by /v1/models)

    @property
    def key(self) -> str:
        parts = [self.model, self.model_sha256, self.prompt["id"], self.prompt["sha256"], self.settings]
        return sha256_json(parts if self.model_sha256 else [*parts, {"server": self.server}])[:16]

    @property
    def keyed_on(self) -> str:
        """What identifies the model in the cache key, in words (module docstring)."""
        if self.model_sha256:
            return f"model file sha256 {self.model_sha256[:12]} ({self.sha256_from or 'model file'})"
        return f"server {self.server} + model id {self.model!r}"

    def to_dict(self) -> dict[str, Any]:  # studies index into it (identity["prompt"]["id"])
        return {
            "model": self.model,
            "model_file": Path(self.model_file).name if self.model_file else None,
            "model_sha256": self.model_sha256,
            "server": self.server,
            "keyed_on": self.keyed_on,
            "prompt": self.prompt,
            "settings": self.settings,
            "key": self.key,
        }


@dataclass
class VerdictCache:
    """Answers by input hash for one judge identity (append-only JSONL; the last line for a key wins).

    Written through the one writer (`AppendLog`): strict JSON, redacted, one whole line per answer. The
    entry kept in memory is the record as written, so a hit serves what a later run would read back.
    """

    path: Path
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: AppendLog | None = None

    def __post_init__(self) -> None:
        if self.log is None:
            self.log = AppendLog(self.path)

    @classmethod
    def open(cls, folder: Path, identity: JudgeIdentity) -> VerdictCache:
        path = folder / "judge" / f"{identity.key}.jsonl"
        cache = cls(path)
        if path.is_file():
            for rec in appended_records(path):  # a line cut by a crash is skipped: that answer is asked again
                cache.entries[rec["input_sha256"]] = rec
        return cache

    def get(self, input_sha256: str) -> dict[str, Any] | None:
        return self.entries.get(input_sha256)

    def put(self, record: dict[str, Any]) -> None:
        assert self.log is not None
        self.entries[record["input_sha256"]] = json.loads(json_line(record))
        self.log.write(record)


class CallLog(AppendLog):
    """`judge_calls.jsonl`: every verdict (judge, generation, synth), appended and flushed as it is made."""
