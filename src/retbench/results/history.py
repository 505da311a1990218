"""The local run history: one SQLite file where every `retbench run` registers itself.

Each entry keeps what a trend or a later gate needs even after the results directory is overwritten:
the config hash, dataset and qrels fingerprints, the user's git commit (and whether the tree was dirty),
per-system means with their bootstrap CIs and coverage, and each system's per-query table (gzip of
per_query.tsv), so `retbench gate --baseline history:last-pass` compares query by query against a
snapshot. Gate verdicts are written back to the entry of the results directory they judged.

Where: the config's `history:` key, else `RETBENCH_HISTORY`, else `$XDG_DATA_HOME/retbench/history.sqlite`
(`~/.local/share/...`). Concurrency: the database runs in WAL mode with a 30 s busy timeout, every write is
one short `BEGIN IMMEDIATE` transaction, and a write that still meets a lock is retried with backoff, so
several runs finishing at once all land (tests/test_history.py starts real processes to check it).
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
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from retbench.errors import InputError

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
    PRIMARY KEY (run_id, system)
);
CREATE INDEX IF NOT EXISTS runs_dir ON runs(results_dir);
"""


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
        yield con
    finally:
        con.close()


@contextmanager
def reading(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection: a read never writes (no schema, no journal-mode switch, no new file), so
    `history` and `gate --baseline history:` work on a file this user may only read. A file that is
    not a readable retbench history (damaged, truncated, another program's database) is an InputError.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("no history yet (every `retbench run` adds to it)", path=p)
    uri = p.resolve().as_uri()
    try:
        con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise InputError(f"cannot open the history: {exc}", path=p) from None
    try:
        try:
            con.execute("SELECT count(*) FROM runs").fetchone()
        except sqlite3.OperationalError as exc:
            if "unable to open" not in str(exc) and "readonly" not in str(exc):
                raise
            # a WAL database in a folder this user cannot write: read it as a fixed file instead
            con.close()
            con = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)
        yield con
    except (sqlite3.DatabaseError, json.JSONDecodeError, OSError, EOFError, zlib.error) as exc:
        raise InputError(
            f"cannot read the history ({exc}); it is damaged or not a retbench history: move it aside "
            "and the next `retbench run` starts a new one",
            path=p,
        ) from None
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


def config_hash(config: Any) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def register(
    results_dir: str | Path, *, path: str | Path | None = None, tag: str | None = None, where: str | Path | None = None
) -> int:
    """Add a finished results directory to the history; returns its run id.

    `where` is the folder whose git commit is recorded (default: the config file's folder).
    """
    from retbench.results import load_results

    res = load_results(results_dir)
    man = res.manifest
    commit, dirty = git_state(where or Path(man.get("config_file") or ".").resolve().parent)
    datasets = [
        {k: d.get(k) for k in ("name", "split", "queries", "corpus_fingerprint", "qrels_fingerprint")}
        for d in man.get("datasets") or []
    ]
    rows: list[tuple[str, str, float, Any, Any]] = []
    systems: list[tuple[str, str, bytes | None]] = []
    for system, summary in res.metrics_json.items():
        if not isinstance(summary, dict) or "error" in summary:
            systems.append(
                (system, json.dumps({"error": summary.get("error") if isinstance(summary, dict) else None}), None)
            )
            continue
        try:
            agg = res.aggregates(system)
        except InputError:
            agg = {}
        for metric, mean in summary.items():
            if isinstance(mean, (int, float)) and not isinstance(mean, bool):
                a = agg.get(metric) or {}
                rows.append((system, metric, float(mean), a.get("ci_low"), a.get("ci_high")))
        pq = res.system_dir(system).per_query
        blob = gzip.compress(pq.read_bytes()) if pq.is_file() else None
        cov = dict(summary.get("coverage") or {})
        with contextlib.suppress(InputError):  # kept beside the coverage: a gate against this entry knows the depth
            cov.setdefault("depth", res.depth(system))
        systems.append((system, json.dumps(cov), blob))
    from retbench import __version__

    def insert(con: sqlite3.Connection) -> int:
        cur = con.execute(
            "INSERT INTO runs (created, experiment, results_dir, config_hash, git_commit, git_dirty, tag, gate,"
            " retbench_version, datasets) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
            (
                time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                str(man.get("experiment") or Path(results_dir).name),
                str(Path(results_dir).resolve()),
                config_hash(man.get("config") or {}),
                commit,
                None if dirty is None else int(dirty),
                tag,
                __version__,
                json.dumps(datasets),
            ),
        )
        run_id = int(cur.lastrowid or 0)
        con.executemany("INSERT INTO scores VALUES (?, ?, ?, ?, ?, ?)", [(run_id, *r) for r in rows])
        con.executemany("INSERT INTO systems VALUES (?, ?, ?, ?)", [(run_id, *s) for s in systems])
        return run_id

    return _write(path or default_path(), insert)


def record_gate(results_dir: str | Path, passed: bool, *, path: str | Path | None = None) -> int | None:
    """Mark the latest history entry of `results_dir` as having passed or failed a gate (None: not registered)."""

    def update(con: sqlite3.Connection) -> int | None:
        row = con.execute(
            "SELECT id FROM runs WHERE results_dir = ? ORDER BY id DESC LIMIT 1", (str(Path(results_dir).resolve()),)
        ).fetchone()
        if row is None:
            return None
        con.execute("UPDATE runs SET gate = ? WHERE id = ?", ("pass" if passed else "fail", row[0]))
        return int(row[0])

    p = path or default_path()
    return _write(p, update) if Path(p).is_file() else None


@dataclass
class Entry:
    id: int
    created: str
    experiment: str
    results_dir: str
    config_hash: str
    git_commit: str | None
    git_dirty: bool | None
    tag: str | None
    gate: str | None
    datasets: list[dict[str, Any]]
    scores: dict[str, dict[str, tuple[float, float | None, float | None]]] = field(default_factory=dict)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)


def entries(
    path: str | Path | None = None, *, system: str | None = None, metric: str | None = None, limit: int | None = None
) -> list[Entry]:
    """History entries, oldest first (the last `limit`), with scores of the given system/metric (default all)."""
    p = Path(path or default_path())
    with reading(p) as con:
        runs = con.execute(
            "SELECT id, created, experiment, results_dir, config_hash, git_commit, git_dirty, tag, gate, datasets"
            " FROM runs ORDER BY id DESC" + (" LIMIT ?" if limit else ""),
            (limit,) if limit else (),
        ).fetchall()
        out = {
            r[0]: Entry(*r[:6], None if r[6] is None else bool(r[6]), r[7], r[8], json.loads(r[9]))  # type: ignore[call-arg]
            for r in runs
        }
        query = "SELECT run_id, system, metric, mean, ci_low, ci_high FROM scores WHERE 1=1"
        args: list[Any] = []
        if system:
            query, args = query + " AND system = ?", [*args, system]
        if metric:
            query, args = query + " AND metric = ?", [*args, metric]
        for run_id, s, m, mean, lo, hi in con.execute(query, args):
            if run_id in out:
                out[run_id].scores.setdefault(s, {})[m] = (mean, lo, hi)
        for run_id, s, cov in con.execute("SELECT run_id, system, coverage FROM systems"):
            if run_id in out:
                out[run_id].coverage[s] = json.loads(cov)
    return [out[k] for k in sorted(out)]


def resolve(spec: str, path: str | Path | None = None) -> Entry:
    """`history:last-pass` (latest entry whose gate passed), `history:last`, `history:<id>` or `history:<tag>`."""
    key = spec.removeprefix("history:")
    rows = entries(path)
    if key == "last-pass":
        found = [e for e in rows if e.gate == "pass"]
    elif key == "last":
        found = rows
    elif key.isdigit():
        found = [e for e in rows if e.id == int(key)]
    else:
        found = [e for e in rows if e.tag == key]
    if not found:
        what = "passed a gate" if key == "last-pass" else f"matches {key!r}"
        raise InputError(f"no run in the history {what}", path=path or default_path(), field="baseline")
    return found[-1]


def evaluations(entry: Entry, path: str | Path | None = None) -> list[Any]:
    """The per-query tables (evaluation.Evaluation) an entry stored, one per system."""
    from retbench.evaluation import Evaluation

    out = []
    with reading(path or default_path()) as con:
        for system, blob, cov in con.execute(
            "SELECT system, per_query, coverage FROM systems WHERE run_id = ? AND per_query IS NOT NULL ORDER BY rowid",
            (entry.id,),
        ):
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "per_query.tsv"
                f.write_bytes(gzip.decompress(blob))
                ev = Evaluation.from_tsv(f)
            ev.system = system
            ev.coverage = json.loads(cov or "{}")  # as metrics.json stored it when the run was registered
            out.append(ev)
    return out
