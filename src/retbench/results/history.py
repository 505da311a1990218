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
per point (one system's fail never overwrites another's pass), and `history:last-pass` is the latest
passing point of the candidate's own key registered before it. A system whose cell was skipped by a
re-run (its `done.json` unchanged: nothing was searched or scored again) is not a new point: `register`
returns the run that already holds it.

Old files (one verdict per run, no point keys) are read as they are, without writing; the first write
adds the new columns and fills them from each run's manifest record (a run-level verdict is kept for a
run that held one system, the only case where it says whose verdict it was).

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


def dataset_identity(d: Any) -> dict[str, Any]:
    """What a point's dataset is: name, split, query count and corpus/qrels fingerprints (None: not recorded)."""
    return {k: d.get(k) for k in DATASET_KEYS} if isinstance(d, dict) else dict.fromkeys(DATASET_KEYS)


def point_keys(keys: list[str], datasets: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """results key -> (bare system name, dataset identity), from the keys of one results directory and the
    datasets its manifest lists. One dataset: the key is the system. Several: keys are `<dataset>/<system>`
    (`results.layout`), their dataset parts in the order the study ran them, which is the manifest's order."""
    from retbench.results.layout import split_key

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


def _done_hash(res: Any, key: str) -> str | None:
    """sha256 of a cell's done.json: unchanged when a re-run skipped the cell (nothing searched or scored)."""
    done = res.system_dir(key).done
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


def register(
    results_dir: str | Path, *, path: str | Path | None = None, tag: str | None = None, where: str | Path | None = None
) -> Registered:
    """Add a finished results directory to the history as one run with a point per system.

    `where` is the folder whose git commit is recorded (default: the config file's folder). A system whose
    done.json is the one an earlier run of the same folder registered is not a new point; when no system
    is new (a re-run that searched nothing) no run is added. A `tag` always adds the run (the tag asks for it).
    """
    from retbench.results import load_results

    res = load_results(results_dir)
    man = res.manifest
    commit, dirty = git_state(where or Path(man.get("config_file") or ".").resolve().parent)
    datasets = [
        {k: d.get(k) for k in ("name", "split", "queries", "corpus_fingerprint", "qrels_fingerprint")}
        for d in man.get("datasets") or []
    ]
    ident = point_keys(list(res.metrics_json), datasets)
    rows: list[tuple[str, str, float, Any, Any]] = []
    systems: list[tuple[str, str, bytes | None, str, str, str | None]] = []
    for system, summary in res.metrics_json.items():
        name, ds = ident[system]
        point = (name, json.dumps(ds, sort_keys=True), _done_hash(res, system))
        if not isinstance(summary, dict) or "error" in summary:
            err = {"error": summary.get("error") if isinstance(summary, dict) else None}
            systems.append((system, json.dumps(err), None, *point))
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
        systems.append((system, json.dumps(cov), blob, *point))
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
                str(man.get("experiment") or Path(results_dir).name),
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


def _candidate_point(con: sqlite3.Connection, results_dir: str | Path, system: str) -> tuple[int, str] | None:
    """(run id, key) of the point holding what `results_dir` holds now for `system` (its done.json), if any."""
    from retbench.results import load_results

    folder = str(Path(results_dir).resolve())
    try:
        done = _done_hash(load_results(results_dir), system)
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
        found = _candidate_point(con, results_dir, system)
        if found is None:
            return None
        con.execute(
            "UPDATE systems SET gate = ? WHERE run_id = ? AND system = ?", ("pass" if passed else "fail", *found)
        )
        return found[0]

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
    gate: str | None  # the verdict of a run registered before verdicts were kept per system
    datasets: list[dict[str, Any]]
    scores: dict[str, dict[str, tuple[float, float | None, float | None]]] = field(default_factory=dict)
    coverage: dict[str, dict[str, Any]] = field(default_factory=dict)
    gates: dict[str, str] = field(default_factory=dict)  # results key -> "pass" / "fail"
    points: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # key -> (system, dataset)
    matched: str | None = None  # the key `resolve` picked, when it picked a point

    def series(self, key: str) -> tuple[str, str, str]:
        """(experiment, dataset identity, system) of one of this run's points: what a trend line joins."""
        name, ds = self.points.get(key, (key, dataset_identity({})))
        return self.experiment, json.dumps(ds, sort_keys=True), name


def _point_rows(con: sqlite3.Connection) -> Iterator[tuple[int, str, str, str | None, str | None, str | None]]:
    """(run id, key, coverage, name, dataset, gate) of every point, on either schema (read-only: an old file's
    missing columns read as NULL and are derived from the run by `entries`)."""
    have = {r[1] for r in con.execute("PRAGMA table_info(systems)")}
    cols = ", ".join(c if c in have else f"NULL AS {c}" for c in ("name", "dataset", "gate"))
    yield from con.execute(f"SELECT run_id, system, coverage, {cols} FROM systems ORDER BY rowid")


def _matches(dataset: dict[str, Any], wanted: str) -> bool:
    """`--dataset` names a dataset by name, name/split, or a fingerprint's prefix."""
    name, split = str(dataset.get("name")), str(dataset.get("split"))
    prints = [str(dataset.get(k) or "") for k in ("corpus_fingerprint", "qrels_fingerprint")]
    return wanted in (name, f"{name}/{split}", f"{name}-{split}") or any(p and p.startswith(wanted) for p in prints)


def entries(
    path: str | Path | None = None,
    *,
    system: str | None = None,
    metric: str | None = None,
    limit: int | None = None,
    experiment: str | None = None,
    dataset: str | None = None,
) -> list[Entry]:
    """History entries, oldest first (the last `limit` that hold a matching point), with the points of the
    given experiment, dataset (name, name/split or fingerprint prefix) and system (bare name or results key)."""
    p = Path(path or default_path())
    with reading(p) as con:
        runs = con.execute(
            "SELECT id, created, experiment, results_dir, config_hash, git_commit, git_dirty, tag, gate, datasets"
            " FROM runs ORDER BY id"
        ).fetchall()
        out = {
            r[0]: Entry(*r[:6], None if r[6] is None else bool(r[6]), r[7], r[8], json.loads(r[9]))  # type: ignore[call-arg]
            for r in runs
            if experiment is None or r[2] == experiment
        }
        has_gate = "gate" in _columns(con)
        cov: dict[int, dict[str, Any]] = {}
        for run_id, key, coverage, name, ds, gate in _point_rows(con):
            e = out.get(run_id)
            if e is None:
                continue
            cov.setdefault(run_id, {})[key] = (json.loads(coverage), name, ds, gate)
        for run_id, e in out.items():
            rows = cov.get(run_id, {})
            derived = point_keys(list(rows), e.datasets)
            for key, (c, name, ds, gate) in rows.items():
                point = (name, json.loads(ds)) if name is not None and ds is not None else derived[key]
                if system and system not in (key, point[0]):
                    continue
                if dataset and not _matches(point[1], dataset):
                    continue
                e.points[key] = point
                e.coverage[key] = c
                # an old file's run-level verdict says whose it was only when the run held one system
                verdict = gate if has_gate else (e.gate if len(rows) == 1 else None)
                if verdict:
                    e.gates[key] = verdict
        query = "SELECT run_id, system, metric, mean, ci_low, ci_high FROM scores"
        args: list[Any] = []
        if metric:
            query, args = query + " WHERE metric = ?", [metric]
        for run_id, s, m, mean, lo, hi in con.execute(query, args):
            if run_id in out and s in out[run_id].points:
                out[run_id].scores.setdefault(s, {})[m] = (mean, lo, hi)
    kept = [out[k] for k in sorted(out) if out[k].points or not (system or dataset)]
    return kept[-limit:] if limit else kept


def _columns(con: sqlite3.Connection) -> set[str]:
    return {r[1] for r in con.execute("PRAGMA table_info(systems)")}


def resolve(spec: str, path: str | Path | None = None, *, candidate: tuple[str | Path, str] | None = None) -> Entry:
    """`history:last-pass`, `history:last`, `history:<id>` or `history:<tag>`.

    With a `candidate` (results directory, system), `last-pass` and `last` pick a point: the latest one of
    the candidate's experiment, dataset and system registered before the candidate's own point (never
    the candidate itself) -- for last-pass, one whose gate passed. Without one, `last-pass` is the
    latest run holding a passing point.
    """
    key = spec.removeprefix("history:")
    p = path or default_path()
    rows = entries(p)
    if key in ("last-pass", "last") and candidate is not None:
        return _resolve_point(key, rows, p, candidate)
    if key == "last-pass":
        found = [e for e in rows if "pass" in e.gates.values()]
    elif key == "last":
        found = rows
    elif key.isdigit():
        found = [e for e in rows if e.id == int(key)]
    else:
        found = [e for e in rows if e.tag == key]
    if not found:
        what = "passed a gate" if key == "last-pass" else f"matches {key!r}"
        raise InputError(f"no run in the history {what}", path=p, field="baseline")
    return found[-1]


class NoBaseline(InputError):
    """No earlier point of the candidate's (experiment, dataset, system) fits `history:last-pass` / `last`."""


def _resolve_point(key: str, rows: list[Entry], path: str | Path, candidate: tuple[str | Path, str]) -> Entry:
    from retbench.results import load_results

    folder, system = candidate
    res = load_results(folder)
    man = res.manifest
    name, ds = point_keys(list(res.metrics_json), [dataset_identity(d) for d in man.get("datasets") or []])[system]
    want = (str(man.get("experiment") or Path(folder).name), json.dumps(ds, sort_keys=True), name)
    with reading(path) as con:
        own = _candidate_point(con, folder, system)
    before = own[0] if own is not None else None
    for e in reversed(rows):
        if before is not None and e.id >= before:
            continue
        for k in e.points:
            if e.series(k) == want and (key == "last" or e.gates.get(k) == "pass"):
                e.matched = k
                return e
    what = "passed a gate" if key == "last-pass" else "was registered"
    where = f"{ds.get('name')}/{ds.get('split')} ({ds.get('queries')} queries)"
    raise NoBaseline(
        f"no earlier run of experiment {want[0]!r} on {where} with system {name!r} {what}",
        path=path,
        field="baseline",
    )


def evaluations(entry: Entry, path: str | Path | None = None) -> list[Any]:
    """The per-query tables (evaluation.Evaluation) an entry stored, one per system (only the point
    `resolve` matched, when it matched one)."""
    from retbench.evaluation import Evaluation

    out = []
    with reading(path or default_path()) as con:
        for system, blob, cov in con.execute(
            "SELECT system, per_query, coverage FROM systems WHERE run_id = ? AND per_query IS NOT NULL ORDER BY rowid",
            (entry.id,),
        ):
            if entry.matched is not None and system != entry.matched:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "per_query.tsv"
                f.write_bytes(gzip.decompress(blob))
                ev = Evaluation.from_tsv(f)
            ev.system = system
            ev.coverage = json.loads(cov or "{}")  # as metrics.json stored it when the run was registered
            out.append(ev)
    return out
