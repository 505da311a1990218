"""Log a results directory to MLflow: one parent run for the experiment, one child run per system.

Params: the experiment config flattened (`config.depth`, `config.evaluation.mode`, ...), dataset and qrels
fingerprints, package versions, and each system's adapter, parameters and config hash. Metrics: every
mean, its bootstrap CI bounds (`<metric>.ci_low` / `.ci_high`) and the coverage counts. Artifacts:
each system's per-query table, run file, statuses and aggregates; the parent gets metrics.json,
manifest.json and the reports. MLflow names allow no `@`, so `ndcg@10` is logged as `ndcg_at_10`
(the original name is kept in the run's `retbench.metric_names` tag). mlflow is the optional extra
`retbench[mlflow]`, imported only here.

Exported once: the parent run is tagged `retbench.fingerprint`, a sha256 of metrics.json and every
system's done.json (what a re-run that searched nothing leaves unchanged, and any new work changes). An
export finds a finished parent with the same fingerprint in the experiment and returns it, logging
nothing; a parent an earlier export left unfinished (it failed midway) is deleted with its children and
logged again.

Bounded and one-line: the tracking URI's scheme is checked before MLflow is asked; a tracking server
gets `timeout` seconds per request and at most `HTTP_RETRIES` retries (MLflow's own defaults, 120 s and
7 retries with exponential backoff, wait for many minutes on a server that never answers; the
`MLFLOW_HTTP_REQUEST_MAX_RETRIES` / `_BACKOFF_FACTOR` environment variables still win); and whatever
the store answers with (a damaged or read-only SQLite file, a refused file store, an unreachable
server) becomes one error naming the URI, never a traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from retbench.errors import InputError, RetbenchError
from retbench.results.layout import SystemDir
from retbench.results.model import StudyResult, SystemResult
from retbench.results.read import config_from_manifest, read_results
from retbench.secrets import clip, redact

MAX_PARAM = 6000  # MLflow's limit on a param value
PARENT_FILES = ("metrics.json", "manifest.json", "report.md", "report.html")
SYSTEM_FILES = ("per_query.tsv", "run.trec", "status.jsonl", "aggregates.json")
# MLflow's tracking stores (https://mlflow.org/docs/latest/tracking.html#storage); "" and file are its file store
SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "file", "")
DEFAULT_TIMEOUT_S = 30
HTTP_RETRIES = 2


def _shown_uri(uri: str) -> str:
    """The URI for a message, without a `user:password@` part."""
    return re.sub(r"//[^/@]*@", "//", uri)


def artifacts_beside(uri: str | None) -> str | None:
    """Where a new experiment's artifacts go when no --artifact-location is given: for a SQLite store, the
    folder `mlartifacts` beside the database file (MLflow's own default is `./mlruns` of whatever folder the
    command runs from, so a repository would gain a folder nobody asked for). None (the store decides) for a
    tracking server, which serves its own artifact root, and for other databases, whose location MLflow keeps.
    """
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri or not uri.lower().startswith("sqlite:///"):
        return None
    db = uri[len("sqlite:///") :].split("?", 1)[0]  # sqlite:///rel/path.db or sqlite:////abs/path.db
    if not db or db == ":memory:":
        return None
    return (Path(db).expanduser().resolve().parent / "mlartifacts").as_uri()


def check_tracking_uri(uri: str | None) -> None:
    """Refuse, before MLflow is imported, a URI MLflow cannot use: an unknown scheme, or its file store
    (MLflow 3 refuses a plain folder or `file:` URI unless `MLFLOW_ALLOW_FILE_STORE=true`)."""
    if uri is None:
        return
    scheme = urlsplit(uri).scheme.lower() if "://" in uri or uri.startswith("file:") else ""
    scheme = scheme.split("+", 1)[0]  # postgresql+psycopg2:// and the like
    if scheme not in SCHEMES:
        raise InputError(
            f"unsupported tracking URI scheme {scheme!r} in {_shown_uri(uri)!r}; MLflow takes "
            "http(s)://host:port, sqlite:///path/mlflow.db, postgresql://, mysql://, mssql:// or databricks",
            field="tracking-uri",
        )
    if scheme in ("", "file") and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
        raise InputError(
            f"{_shown_uri(uri)!r} is MLflow's file store, which MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true; "
            "give a database URI such as sqlite:///mlflow.db or a server's http://host:port",
            field="tracking-uri",
        )


@contextmanager
def _bounded_http(timeout: int) -> Iterator[None]:
    """MLflow's HTTP settings for the length of one export (`timeout` s per request, few retries), and its
    INFO logging quieted."""
    wanted = {
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(timeout),
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(HTTP_RETRIES)),
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": os.environ.get("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
    }
    before = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    # MLflow's and Alembic's INFO lines (table creation, migrations) would break the one-line error rule;
    # mlflow sets its loggers up when imported, so that comes first
    with contextlib.suppress(ImportError):
        import mlflow  # noqa: F401
    loggers = [logging.getLogger(name) for name in ("mlflow", "alembic")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _first_line(exc: BaseException) -> str:
    text = redact(str(exc)).strip().splitlines()  # redacted whole first: a secret may span the line break
    return (text[0] if text else type(exc).__name__)[:400]


def mlflow_name(name: str) -> str:
    """A metric or param name MLflow accepts: `@` -> `_at_`, other odd characters -> `_`."""
    return re.sub(r"[^A-Za-z0-9_\-. /]", "_", name.replace("@", "_at_"))


def flatten(obj: object, prefix: str) -> Iterator[tuple[str, str]]:
    """(dotted key, value) pairs of nested mappings; lists and scalars become JSON text."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}")
    else:
        text = obj if isinstance(obj, str) else json.dumps(obj, default=str)
        yield mlflow_name(prefix), clip(text, MAX_PARAM - 3)  # redacted, then cut; "..." included


def _client(tracking_uri: str | None) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise InputError("exporting to MLflow needs mlflow: pip install 'retbench[mlflow]'", field="mlflow") from None
    return MlflowClient(tracking_uri=tracking_uri)


def _log(client: Any, run_id: str, params: dict[str, str], metrics: dict[str, float]) -> None:
    from mlflow.entities import Metric, Param

    now = int(time.time() * 1000)
    ps = [Param(k, v) for k, v in params.items()]
    ms = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    for i in range(0, max(len(ps), len(ms)), 100):  # MLflow takes at most 100 params per batch
        client.log_batch(run_id, metrics=ms[i : i + 100], params=ps[i : i + 100])


def system_metrics(system: SystemResult) -> dict[str, float]:
    """A system's values with their CI bounds, and its coverage counts, as MLflow metrics (NaN: left out)."""
    out: dict[str, float] = {}
    for m, v in system.metrics.items():
        for suffix, x in (("", v.value), (".ci_low", v.ci_low), (".ci_high", v.ci_high)):
            if x is not None and math.isfinite(x):
                out[f"{mlflow_name(m)}{suffix}"] = float(x)
    for k, v in system.coverage.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"coverage.{k}"] = float(v)
    return out


def export_mlflow(
    results: StudyResult | str | Path,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    artifact_location: str | None = None,
    timeout: int = DEFAULT_TIMEOUT_S,
) -> Exported:
    """Log a study's results (or the folder holding them) to MLflow; returns {"experiment_id", "parent_run_id",
    "runs": {system: run id}, "existing", "artifact_location"} ("existing": these same results were logged before,
    and nothing was logged again; "artifact_location": where the experiment keeps its artifacts, `artifacts_beside`
    the store unless `artifact_location` said otherwise when the experiment was created).

    `timeout`: seconds a tracking server gets per request. Anything the store fails with is an InputError
    naming the URI (and the runs already logged, which stay in MLflow).
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
        raise InputError(f"timeout must be a whole number of seconds >= 1, got {timeout!r}", field="timeout")
    res = results if isinstance(results, StudyResult) else read_results(results)
    if res.root is None:
        raise InputError("these results were never written to a folder; nothing to export", field="results")
    check_tracking_uri(tracking_uri)
    done: Exported = {}
    with _bounded_http(timeout):
        try:
            return _export(res, res.root, tracking_uri, experiment, artifact_location, done)
        except RetbenchError:
            raise
        except Exception as exc:  # MLflow, SQLAlchemy, requests and OS errors: the store's answer, in one line
            where = _shown_uri(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "MLflow's default store")
            logged = f" (already logged: parent run {done['parent_run_id']})" if done.get("parent_run_id") else ""
            raise InputError(
                f"MLflow tracking store {where!r} failed: {_first_line(exc)}{logged}", field="tracking-uri"
            ) from None


class Exported(TypedDict, total=False):
    """What an export logged (or found logged before): the experiment, the parent run, each system's run, whether
    these same results were logged already, and where the experiment keeps its artifacts."""

    experiment_id: str
    parent_run_id: str
    runs: dict[str, str]
    existing: bool
    artifact_location: str


def _export(
    res: StudyResult,
    results_dir: Path,
    tracking_uri: str | None,
    experiment: str | None,
    artifact_location: str | None,
    done: Exported,
) -> Exported:
    man = res.manifest
    client = _client(tracking_uri)
    run_name = man.title or Path(results_dir).name
    name = experiment or run_name
    found = client.get_experiment_by_name(name)
    if found is None:
        store = getattr(client, "tracking_uri", None) or tracking_uri  # MLflow's default store when none is named
        exp_id = client.create_experiment(name, artifact_location or artifacts_beside(store))
    else:
        exp_id = found.experiment_id
    artifacts = str(client.get_experiment(exp_id).artifact_location)  # an existing experiment keeps its own
    common: dict[str, str] = dict(flatten(config_from_manifest(man), "config"))
    for i, d in enumerate(man.datasets):
        for key in ("name", "split", "queries", "documents", "corpus_fingerprint", "qrels_fingerprint"):
            if d.get(key) is not None:
                common[f"dataset{i}.{key}"] = str(d[key])
    common.update(flatten(man.get("versions") or {}, "versions"))
    common.update(flatten(man.get("evaluation") or {}, "evaluation"))
    names = {mlflow_name(m): m for s in res for m in s.metrics}
    tags = {"retbench.results_dir": str(Path(results_dir).resolve()), "retbench.metric_names": json.dumps(names)}
    fp = results_fingerprint(res)
    earlier = _earlier_export(client, exp_id, fp)
    if earlier is not None:
        return {**earlier, "artifact_location": artifacts}
    parent = client.create_run(exp_id, run_name=run_name, tags={**tags, FINGERPRINT_TAG: fp})
    pid = done["parent_run_id"] = parent.info.run_id
    _log(client, pid, common, {})
    for f in PARENT_FILES:
        if (Path(results_dir) / f).is_file():
            client.log_artifact(pid, str(Path(results_dir) / f))
    runs: dict[str, str] = {}
    for system, summary in res.systems.items():
        child = client.create_run(
            exp_id, run_name=system, tags={"mlflow.parentRunId": pid, "retbench.system": system, **tags}
        )
        cid = runs[system] = child.info.run_id
        info = man.system(system)
        params = {**common, "system": system, "adapter": str(info.get("adapter", ""))}
        params.update(flatten(info.get("describe") or {}, "describe"))
        if info.get("config_hash"):
            params["config_hash"] = str(info["config_hash"])
        _log(client, cid, params, system_metrics(summary))
        folder = SystemDir.of(results_dir, system).root
        for f in SYSTEM_FILES:
            if (folder / f).is_file():
                client.log_artifact(cid, str(folder / f), "system")
        client.set_terminated(cid, "FAILED" if summary.failed else "FINISHED")
    client.set_terminated(pid)
    return {
        "experiment_id": exp_id,
        "parent_run_id": pid,
        "runs": runs,
        "existing": False,
        "artifact_location": artifacts,
    }


FINGERPRINT_TAG = "retbench.fingerprint"


def results_fingerprint(res: StudyResult) -> str:
    """sha256 of metrics.json and each system's done.json as written: the same until a run searches or scores
    anew (the files' bytes, so an export made by an earlier version is recognised)."""
    root = res.root or Path(".")
    h = hashlib.sha256((root / "metrics.json").read_bytes())
    for system in res.systems:
        done = SystemDir.of(root, system).done
        h.update(system.encode() + b"\0" + (done.read_bytes() if done.is_file() else b""))
    return h.hexdigest()


def _earlier_export(client: Any, exp_id: str, fp: str) -> Exported | None:
    """The finished export of these same results, if the experiment holds one; an unfinished one is deleted."""
    found = client.search_runs([exp_id], filter_string=f"tags.`{FINGERPRINT_TAG}` = '{fp}'")
    for parent in sorted(found, key=lambda r: r.info.start_time or 0, reverse=True):
        pid = parent.info.run_id
        children = client.search_runs([exp_id], filter_string=f"tags.`mlflow.parentRunId` = '{pid}'")
        if parent.info.status == "FINISHED":
            runs = {c.data.tags.get("retbench.system", c.info.run_name): c.info.run_id for c in children}
            return {"experiment_id": exp_id, "parent_run_id": pid, "runs": runs, "existing": True}
        for run in [*children, parent]:
            client.delete_run(run.info.run_id)
    return None
