"""The local run history: one SQLite file where every `retbench run` registers itself.

Each entry keeps what a trend or a later gate needs even after the results directory is overwritten:
the config hash, dataset and qrels fingerprints, the user's git commit (and whether the tree was dirty),
per-system means with their bootstrap CIs and coverage, and each system's per-query table (gzip of
per_query.tsv), so `retbench gate --baseline history:last-pass` compares query by query against a
snapshot.

A *point* is one system's numbers in one run, keyed by (experiment, dataset, system): the experiment is
the config's name, the dataset its name, split, query count and corpus/qrels fingerprints as the
manifest records them, the system its bare name (`bm25`, not `scifact/bm25`). Trends join only points
of the same key, so SciFact and a 50-query slice of it are two lines, never one. Gate verdicts are kept
per point (one system's fail never overwrites another's pass). A system whose cell was skipped by a
re-run (its `done.json` unchanged: nothing was searched or scored again) is not a new point: `register`
returns the run that already holds it.

This module owns the file and every write to it (schema, migration, `register`, `record_gate`) and the
point keys both sides share; reading it back (trend entries, `history:` baselines) is
`results.history_read`, which never writes.

Old files (one verdict per run, no point keys) get the new columns on the first write, filled from each
run's manifest record (a run-level verdict is kept for a run that held one system, the only case where it
says whose verdict it was).

Where: the config's `history:` key, else `RETBENCH_HISTORY`, else `$XDG_DATA_HOME/retbench/history.sqlite`
(`~/.local/share/...`). Concurrency: the database runs in WAL mode with a 30 s busy timeout, every write is
one short `BEGIN IMMEDIATE` transaction, and a write that still meets a lock is retried with backoff, so
several runs finishing at once all land (tests/integration/results/test_history.py starts real processes
to check it).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import random
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from retbench.errors import InputError
from retbench.results.layout import SystemDir, split_key
from retbench.results.model import StudyResult
from retbench.results.read import read_results

ENV = "RETBENCH_HISTORY"
BUSY_TIMEOUT_S = 30.0
RETRIES = 8
T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    experiment TEXT NOT NULL,
    results_dir TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    git_commit TEXT,
    git_dirty INTEGER,
    tag TEXT,
    gate TEXT,
    retbench_version TEXT,
    datasets TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS scores (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    system TEXT NOT NULL,
    metric TEXT NOT NULL,
    mean REAL,
    ci_low REAL,
    ci_high REAL,
    PRIMARY KEY (run_id, system, metric)
);
CREATE TABLE IF NOT EXISTS systems (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    system TEXT NOT NULL,
    coverage TEXT NOT NULL,
    per_query BLOB,
    name TEXT,
    dataset TEXT,
    gate TEXT,
    done TEXT,
    PRIMARY KEY (run_id, system)
);
CREATE INDEX IF NOT EXISTS runs_dir ON runs(results_dir);
"""
# columns added to `systems` after the first schema: (bare system name, dataset identity as JSON, the
# point's gate verdict, sha256 of the cell's done.json); added and filled on the first write to an old file
POINT_COLUMNS = ("name", "dataset", "gate", "done")
DATASET_KEYS = ("name", "split", "queries", "corpus_fingerprint", "qrels_fingerprint")


def default_path(configured: str | Path | None = None) -> Path:
    """The history file: the config's `history:`, else $RETBENCH_HISTORY, else the per-user data folder."""
    if configured:
        return Path(configured).expanduser()
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "retbench" / "history.sqlite"


def _retry(fn: Callable[[], T]) -> T:
    """Run a write, retrying with jittered backoff while another process holds the lock past the busy timeout."""
    for attempt in range(RETRIES):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == RETRIES - 1:
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


@contextmanager
def connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(p, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _retry(lambda: con.execute("PRAGMA journal_mode = WAL"))
        _retry(lambda: con.executescript(SCHEMA))
        _retry(lambda: _migrate(con))
        yield con
    finally:
        con.close()


def _write(path: str | Path, fn: Callable[[sqlite3.Connection], T]) -> T:
    """One short immediate transaction (retried as a whole when the lock cannot be had)."""
    with connect(path) as con:

        def attempt() -> T:
            con.execute("BEGIN IMMEDIATE")
            try:
                out = fn(con)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
            return out

        return _retry(attempt)


def git_state(where: str | Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree holding `where`, or (None, None) outside one."""
    cwd = Path(where)
    cwd = cwd if cwd.is_dir() else cwd.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None, None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return head.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None


def config_hash(config: object) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def dataset_identity(d: object) -> dict[str, object]:
    """What a point's dataset is: name, split, query count and corpus/qrels fingerprints (None: not recorded)."""
    return {k: d.get(k) for k in DATASET_KEYS} if isinstance(d, dict) else dict.fromkeys(DATASET_KEYS)


def point_keys(keys: list[str], datasets: Sequence[Mapping[str, object]]) -> dict[str, tuple[str, dict[str, object]]]:
    """results key -> (bare system name, dataset identity), from the keys of one results directory and the
    datasets its manifest lists. One dataset: the key is the system. Several: keys are `<dataset>/<system>`
    (`results.layout`), their dataset parts in the order the study ran them, which is the manifest's order."""
    if len(datasets) <= 1:
        ds = dataset_identity(datasets[0] if datasets else {})
        return {k: (k, ds) for k in keys}
    parts = list(dict.fromkeys(split_key(k)[0] for k in keys))
    out = {}
    for k in keys:
        part, name = split_key(k)
        i = parts.index(part)
        if len(parts) != len(datasets):  # some dataset left no system: match the part by the dataset's name
            i = next((j for j, d in enumerate(datasets) if part.split(".")[0].startswith(str(d.get("name")))), -1)
        out[k] = (name, dataset_identity(datasets[i]) if i >= 0 else dataset_identity({}))
    return out


def _migrate(con: sqlite3.Connection) -> None:
    """Bring a file of the first schema up to the point schema (new columns, filled from each run)."""
    have = {r[1] for r in con.execute("PRAGMA table_info(systems)")}
    if all(c in have for c in POINT_COLUMNS):
        con.execute("CREATE INDEX IF NOT EXISTS systems_point ON systems(name)")
        return
    con.execute("BEGIN IMMEDIATE")
    try:
        have = {r[1] for r in con.execute("PRAGMA table_info(systems)")}
        for col in POINT_COLUMNS:
            if col not in have:
                con.execute(f"ALTER TABLE systems ADD COLUMN {col} TEXT")
        runs = {r[0]: (json.loads(r[1] or "[]"), r[2]) for r in con.execute("SELECT id, datasets, gate FROM runs")}
        keys: dict[int, list[str]] = {}
        for run_id, key in con.execute("SELECT run_id, system FROM systems ORDER BY rowid"):
            keys.setdefault(run_id, []).append(key)
        for run_id, ks in keys.items():
            datasets, gate = runs.get(run_id, ([], None))
            for key, (name, ds) in point_keys(ks, datasets).items():
                con.execute(
                    "UPDATE systems SET name = ?, dataset = ?, gate = ? WHERE run_id = ? AND system = ?",
                    (name, json.dumps(ds, sort_keys=True), gate if len(ks) == 1 else None, run_id, key),
                )
        con.execute("CREATE INDEX IF NOT EXISTS systems_point ON systems(name)")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _done_hash(root: Path | None, key: str) -> str | None:
    """sha256 of a cell's done.json: unchanged when a re-run skipped the cell (nothing searched or scored)."""
    done = SystemDir.of(root or ".", key).done
    return hashlib.sha256(done.read_bytes()).hexdigest() if done.is_file() else None


@dataclass
class Registered:
    """What `register` did: the new run's id (None: nothing new) and the systems left out because an
    earlier run already holds the same cell (system -> that run's id)."""

    run_id: int | None
    repeats: dict[str, int] = field(default_factory=dict)

    def lines(self, where: str | Path) -> list[str]:
        """What a run prints about its history entry: the systems left unchanged, then the new run."""
        out = []
        if self.repeats:  # cells this run skipped: the history already holds them
            held = ", ".join(f"{s} (run {r})" for s, r in self.repeats.items())
            out.append(f"history: unchanged, nothing searched: {held}")
        if self.run_id is not None:
            out.append(f"history: run {self.run_id} in {where}")
        return out


def failed_point(coverage: Mapping[str, object]) -> bool:
    """Whether a point records a failure, never a number: the system failed as a whole (`error`), or every judged
    query it was asked failed (a backend down: its means would be 0.0 from failures alone)."""
    if "error" in coverage:
        return True
    failed = coverage.get("failed")
    return bool(coverage.get("judged")) and coverage.get("answered") == 0 and isinstance(failed, int) and failed > 0


def register(
    results: StudyResult | str | Path,
    *,
    path: str | Path | None = None,
    tag: str | None = None,
    where: str | Path | None = None,
) -> Registered:
    """Add a study's written results (or the folder holding them) to the history as one run with a point
    per system.

    `where` is the folder whose git commit is recorded (default: the config file's folder). A system whose
    done.json is the one an earlier run of the same folder registered is not a new point; when no system
    is new (a re-run that searched nothing) no run is added. A `tag` always adds the run (the tag asks for it).
    """
    res = results if isinstance(results, StudyResult) else read_results(results)
    if res.root is None:
        raise InputError("these results were never written to a folder; nothing to register", field="results")
    results_dir = res.root
    man = res.manifest
    commit, dirty = git_state(where or Path(man.get("config_file") or ".").resolve().parent)
    datasets = [{k: d.get(k) for k in DATASET_KEYS} for d in man.datasets]
    rows, systems = _points(res, results_dir, point_keys(list(res.systems), datasets))
    from retbench import __version__

    folder = str(Path(results_dir).resolve())

    def insert(con: sqlite3.Connection) -> Registered:
        repeats: dict[str, int] = {}
        for system, *_, done in systems:
            if tag is None and done is not None:
                row = con.execute(
                    "SELECT s.run_id FROM systems s JOIN runs r ON r.id = s.run_id"
                    " WHERE r.results_dir = ? AND s.system = ? AND s.done = ? ORDER BY s.run_id DESC LIMIT 1",
                    (folder, system, done),
                ).fetchone()
                if row is not None:
                    repeats[system] = int(row[0])
        fresh = [s for s in systems if s[0] not in repeats]
        if not fresh:
            return Registered(None, repeats)
        cur = con.execute(
            "INSERT INTO runs (created, experiment, results_dir, config_hash, git_commit, git_dirty, tag, gate,"
            " retbench_version, datasets) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
            (
                time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                man.title or Path(results_dir).name,
                folder,
                config_hash(man.get("config") or {}),
                commit,
                None if dirty is None else int(dirty),
                tag,
                __version__,
                json.dumps(datasets),
            ),
        )
        run_id = int(cur.lastrowid or 0)
        con.executemany(
            "INSERT INTO scores VALUES (?, ?, ?, ?, ?, ?)", [(run_id, *r) for r in rows if r[0] not in repeats]
        )
        con.executemany(
            "INSERT INTO systems (run_id, system, coverage, per_query, name, dataset, done) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(run_id, *s) for s in fresh],
        )
        return Registered(run_id, repeats)

    return _write(path or default_path(), insert)


_Score = tuple[str, str, float, float | None, float | None]  # system, metric, value, ci_low, ci_high
# system, coverage JSON, gzipped per-query table, point name, dataset JSON, done.json hash
_Point = tuple[str, str, bytes | None, str, str, str | None]


def _points(
    res: StudyResult, root: Path, ident: Mapping[str, tuple[str, Mapping[str, object]]]
) -> tuple[list[_Score], list[_Point]]:
    """Each system's score rows and its systems row (coverage with the depth beside it, the compressed table)."""
    rows: list[_Score] = []
    systems: list[_Point] = []
    for system, summary in res.systems.items():
        name, ds = ident[system]
        point = (name, json.dumps(ds, sort_keys=True), _done_hash(root, system))
        if summary.failed:
            systems.append((system, json.dumps({"error": summary.error}), None, *point))
            continue
        cov = dict(summary.coverage)
        if failed_point(cov):  # every query failed (the backend was down): shown as failed, never a 0.0 point
            error = f"every judged query failed ({cov['failed']} of {cov['judged']})"
            systems.append((system, json.dumps({**cov, "error": error}), None, *point))
            continue
        for metric, v in summary.metrics.items():
            rows.append((system, metric, v.value, v.ci_low, v.ci_high))
        pq = SystemDir.of(root, system).per_query  # the table itself is kept, compressed
        blob = gzip.compress(pq.read_bytes()) if pq.is_file() else None
        with contextlib.suppress(InputError):  # kept beside the coverage: a gate against this entry knows the depth
            cov.setdefault("depth", res.depth(system))
        systems.append((system, json.dumps(cov), blob, *point))
    return rows, systems


def candidate_point(con: sqlite3.Connection, results_dir: str | Path, system: str) -> tuple[int, str] | None:
    """(run id, key) of the point holding what `results_dir` holds now for `system` (its done.json), if any."""
    folder = str(Path(results_dir).resolve())
    try:
        done = _done_hash(Path(results_dir), system)
    except (InputError, OSError):
        done = None
    row = con.execute(
        "SELECT s.run_id, s.system FROM systems s JOIN runs r ON r.id = s.run_id WHERE r.results_dir = ?"
        " AND s.system = ? AND (s.done IS NULL OR ? IS NULL OR s.done = ?) ORDER BY s.run_id DESC LIMIT 1",
        (folder, system, done, done),
    ).fetchone()
    return (int(row[0]), str(row[1])) if row is not None else None


def record_gate(results_dir: str | Path, passed: bool, *, system: str, path: str | Path | None = None) -> int | None:
    """Record a gate verdict on the point of `system` that holds what `results_dir` holds now; returns its
    run id (None: not registered, or the folder changed since it was)."""

    def update(con: sqlite3.Connection) -> int | None:
        found = candidate_point(con, results_dir, system)
        if found is None:
            return None
        con.execute(
            "UPDATE systems SET gate = ? WHERE run_id = ? AND system = ?", ("pass" if passed else "fail", *found)
        )
        return found[0]

    p = path or default_path()
    return _write(p, update) if Path(p).is_file() else None
