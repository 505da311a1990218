"""Reading the run history back, never writing it: the entries a trend shows and the gate's baselines.

Apart from `results.history` (the file, its schema and every write) because a read opens the file
read-only: no schema, no journal-mode switch, no migration, no new file. So `retbench history` and
`gate --baseline history:` work on a file this user may only read, and an old file (one verdict per run,
no point keys) is read as it is, its points derived from each run's manifest record.

`history:last-pass` is the latest passing point of the candidate's own (experiment, dataset, system)
registered before the candidate's point; `history:last` the latest such point whatever its verdict;
`history:<run id>` and `history:<tag>` name a run.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retbench.errors import InputError
from retbench.results.history import (
    BUSY_TIMEOUT_S,
    candidate_point,
    dataset_identity,
    default_path,
    failed_point,
    point_keys,
)

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation


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
    # The history runs in WAL mode. Opening it even read-only makes SQLite create `-wal` and `-shm` files
    # beside it, which a read-only connection can never remove. With no `-wal` file there is no writer and no
    # commit waiting in a log: the main file holds everything, and is read as a fixed file (`immutable=1`:
    # no lock, no side file). With one, a writer is at work or left commits in its log: the read goes
    # through the log (plain `mode=ro`), which reads those commits and never checkpoints them.
    settled = not Path(f"{p}-wal").exists()
    try:
        con = sqlite3.connect(f"{uri}?mode=ro{'&immutable=1' if settled else ''}", uri=True, timeout=BUSY_TIMEOUT_S)
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


@dataclass
class Entry:
    """One run of the history with those of its points an `entries` query kept (`matched`: the one `resolve` picked)."""

    id: int
    created: str
    experiment: str
    results_dir: str
    config_hash: str
    git_commit: str | None
    git_dirty: bool | None
    tag: str | None
    gate: str | None  # the verdict of a run registered before verdicts were kept per system
    datasets: list[dict[str, object]]
    scores: dict[str, dict[str, tuple[float, float | None, float | None]]] = field(default_factory=dict)
    coverage: dict[str, dict[str, object]] = field(default_factory=dict)
    gates: dict[str, str] = field(default_factory=dict)  # results key -> "pass" / "fail"
    points: dict[str, tuple[str, dict[str, object]]] = field(default_factory=dict)  # key -> (system, dataset)
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


def _matches(dataset: Mapping[str, object], wanted: str) -> bool:
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
        args: list[str] = []
        if metric:
            query, args = query + " WHERE metric = ?", [metric]
        for run_id, s, m, mean, lo, hi in con.execute(query, args):
            # a failed point (an older file may hold its 0.0 means) is shown as failed, never as a number
            if run_id in out and s in out[run_id].points and not failed_point(out[run_id].coverage[s]):
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
    name, ds = point_keys(list(res.systems), [dataset_identity(d) for d in man.datasets])[system]
    want = (man.title or Path(folder).name, json.dumps(ds, sort_keys=True), name)
    with reading(path) as con:
        own = candidate_point(con, folder, system)
    before = own[0] if own is not None else None
    for e in reversed(rows):
        if before is not None and e.id >= before:
            continue
        for k in e.points:
            if failed_point(e.coverage.get(k, {})):
                continue  # a failed run is no baseline
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


def evaluations(entry: Entry, path: str | Path | None = None) -> list[Evaluation]:
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
