"""Where a cell's heavy work runs: in this process, or spread over a Ray cluster.

The cell runner asks an executor for two things and journals what comes back itself:

- `encode_corpus(retriever, corpus)` fills the embedding cache for every encoder the retriever uses.
  The corpus is read `Encoder.stream_batch` texts at a time (the batches `index()` reads) and each
  batch is cut into the encoder's own shard plan (`Encoder.plan`: uncached texts, once each,
  longest first, `shard_size` per shard); each shard is one `encode` call that writes one cache
  shard atomically. In process the shards run one after another; on Ray they go to one actor per
  GPU (or one per CPU where the cluster has no GPU), drawn from the stream as actors free up (at
  most two queued per actor), all writing into the same cache folder (shard names are unique per
  writer, written to a temporary name and renamed). So an interrupted or partly failed encode
  resumes from the shards already written, a re-run encodes nothing, a vector does not depend on
  where it was computed, and no list of every text is built. The retriever's own `index()` then
  finds every vector in the cache. Encoders other than sentence-transformers ones (HTTP, ONNX,
  static) are not rebuilt on workers: they fill the cache in this process (the report says so).
- `search(...)` answers queries in batches and hands each batch's answers to `on_batch`. On Ray the
  batches go to actors that `load()` the index the runner saved (they never rebuild it); an actor
  that dies mid-batch is restarted and the batch retried by Ray (`max_restarts`, `max_task_retries`).
  Only the driver writes the journal, and only answers that came back, so a retried batch is
  journaled once. Either way a batch whose search call raised is asked again one query at a time
  (`retrievers/base.isolate_failures`), so a failure lands on the query that raised it; how many batches
  that took is kept in the search conditions (`batch_fallbacks`).

An experiment picks one with `executor: ray` or `executor: {kind: ray, address: ..., workers: N}`
(address else `$RAY_ADDRESS`, else a local cluster of `num_cpus` CPUs); the default runs in process.
For a multi-node cluster the cache folder (`cache_dir`, `$RETBENCH_CACHE`) and the results folder
must be on storage every node sees.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from retbench.config.experiment import ExecutorBlock
from retbench.data import Corpus, Queries, Run
from retbench.errors import BackendError, ConfigError
from retbench.retrievers.base import Ranking, Retriever, create
from retbench.retrievers.encoders import Encoder
from retbench.studies.measured import (
    encoders_of,
    fallback_figures,
    fallbacks_of,
    search_conditions,
    warm_query_vectors,
)
from retbench.studies.resources import rate, worker_figures

RAY_VERSION = "2.60.0"
NICENESS_ENV = "RAY_worker_niceness"  # Ray's own name for its `worker_niceness` setting (case matters)

#: one answered query: (qid, ranking, status, latency, error, latency batch: queries its latency is a share of)
Answer = tuple[str, Ranking, str, float | None, str | None, int | None]
OnBatch = Callable[[list[Answer]], None]


def make_executor(settings: ExecutorBlock | None = None) -> InProcess | RayExecutor:
    """The executor an experiment's validated `executor:` block names (in process when there is none)."""
    settings = settings or ExecutorBlock()
    return RayExecutor(settings) if settings.kind == "ray" else InProcess()


def devices_of(retriever: Retriever, *extra: str) -> list[str]:
    """Devices a retriever's encoders run on (plus `extra`); a retriever without one runs on the CPU."""
    return sorted({e.device for e in encoders_of(retriever)} | set(extra)) or ["cpu"]


def answers(run: Run) -> list[Answer]:
    """A Run's per-query results as plain tuples (what crosses process boundaries)."""
    return [
        (q, run.ranking(q), run.status[q].value, run.latency.get(q), run.errors.get(q), run.latency_batch.get(q))
        for q in run.query_ids
    ]


def shard_stream(enc: Encoder, corpus: Corpus | Sequence[str]) -> Iterator[list[str]]:
    """The shards an encode of `corpus` computes, planned one corpus batch at a time.

    The texts are read `enc.stream_batch` at a time (the batches `DenseRetriever.index` reads), so
    no list of every text is ever held; each batch is planned by `Encoder.plan` (uncached texts,
    longest first, `shard_size` per shard) when the shards before it have been handed out.
    """
    size = enc.stream_batch
    if isinstance(corpus, Corpus):
        parts: Iterator[Sequence[str]] = corpus.joined_batches(size)
    else:
        parts = (corpus[start : start + size] for start in range(0, len(corpus), size))
    for texts in parts:
        yield from enc.plan(texts, "document")


def encode_here(enc: Encoder, corpus: Corpus | Sequence[str]) -> int:
    """Fill the cache for `corpus` in this process, shard by shard; returns the texts encoded."""
    encoded = 0
    for shard in shard_stream(enc, corpus):
        enc.encode(shard, "document")
        encoded += len(shard)
    return encoded


def batches(queries: Queries, todo: Sequence[str], size: int) -> Iterator[Queries]:
    for start in range(0, len(todo), size):
        yield queries.subset(todo[start : start + size])


class InProcess:
    """Everything in this process, one shard and one batch after another (the default)."""

    kind = "in_process"

    def encode_corpus(self, retriever: Retriever, corpus: Corpus | Sequence[str]) -> dict[str, Any]:
        encoded, t0 = 0, time.perf_counter()
        devices = set()
        for enc in encoders_of(retriever):
            if not enc.use_cache:
                continue  # nothing to fill: index() encodes
            devices.add(enc.device)
            encoded += encode_here(enc, corpus)
        seconds = time.perf_counter() - t0
        return {
            "executor": self.kind,
            "workers": 1,
            "encoded": encoded,
            "encode_docs_per_s": rate(encoded, seconds),
            "devices": sorted(devices),
        }

    def search(
        self,
        retriever: Retriever,
        queries: Queries,
        todo: Sequence[str],
        k: int,
        batch_size: int,
        on_batch: OnBatch,
        *,
        adapter: str = "",
        params: dict[str, Any] | None = None,
        index_dir: Path | None = None,
    ) -> dict[str, Any]:
        """Batches one after another on the live retriever (`adapter`, `params` and `index_dir` are what a
        remote worker would rebuild it from: unused here)."""

        def search() -> None:
            for batch in batches(queries, todo, batch_size):
                on_batch(answers(retriever.search(batch, k)))

        warm = warm_query_vectors(retriever, [queries[q] for q in todo])
        return {"executor": self.kind, "workers": 1, **warm, **search_conditions(retriever, search)}

    def close(self) -> None:
        """Nothing to release."""


# -- Ray -----------------------------------------------------------------------------------------
def _import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"executor: ray needs the ray package; install retbench's ray extra (pip install 'retbench[ray]', ray=={RAY_VERSION})",
            field="executor",
        ) from None
    return ray


def init_ray(ray: ModuleType, attempts: int = 3, **kwargs: object) -> None:
    """`ray.init`, tried again when a local node misses Ray's fixed 30 s start-up window (a loaded machine).

    A local cluster's workers run at the priority of this process: Ray starts worker processes
    with `nice 15` by default (its `worker_niceness` setting), so on a machine where anything else
    at normal priority wants the same cores, an encode on Ray gets a small share of them while the
    in-process encode gets a fair one (measured in benchmarks/RESULTS.md, "Scaling").
    `RAY_worker_niceness` set by the user wins. A cluster that is joined keeps its own setting.

    A failed start leaves the processes it spawned running (Ray's shutdown does not know them), so
    this process's own Ray children are stopped before the next attempt.
    """
    os.environ.setdefault(NICENESS_ENV, "0")  # read by the raylet a local ray.init starts
    for attempt in range(attempts):
        try:
            ray.init(**kwargs)
            return
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == attempts - 1:
                raise
            ray.shutdown()
            _stop_own_ray_children()


def _stop_own_ray_children() -> None:
    import psutil  # a dependency of ray

    for child in psutil.Process().children(recursive=True):
        try:
            if any("ray" in part for part in child.cmdline()):
                child.kill()
        except psutil.Error:
            continue


class EncodeWorker:
    """A Ray actor holding one encoder (one model load per worker); vectors go to the shared cache."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.encoder = Encoder(**options)

    def encode(self, texts: list[str], role: str) -> dict[str, object]:
        t0 = time.perf_counter()
        self.encoder.encode(texts, role)
        return {
            "texts": len(texts),
            "seconds": time.perf_counter() - t0,
            "device": self.encoder.device,
            **worker_figures(),  # cpu_seconds: the worker's whole life so far (start, imports, model load)
        }


class SearchWorker:
    """A Ray actor that loads a saved index once and answers batches of queries."""

    def __init__(self, adapter: str, params: dict[str, Any], name: str, index_dir: str, cwd: str) -> None:

        if os.path.isdir(cwd):  # relative paths in params (a cache_dir) mean what they meant to the driver
            os.chdir(cwd)
        self.retriever = create(adapter, params, name=name)
        self.retriever.load(index_dir)

    def search(self, batch: Queries, k: int) -> tuple[list[Answer], dict[str, object]]:
        fell = [f.snapshot() for f in fallbacks_of(self.retriever)]
        found = answers(self.retriever.search(batch, k))
        return found, {**worker_figures(), **fallback_figures(self.retriever, fell)}


class RayExecutor:
    """Encode shards and search batches on a Ray cluster (local, `address`, or `$RAY_ADDRESS`)."""

    kind = "ray"

    def __init__(self, settings: ExecutorBlock) -> None:
        self.settings = settings
        self.ray = _import_ray()
        self._started = False
        if not self.ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            address = settings.address or os.environ.get("RAY_ADDRESS") or None
            kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
            if address is None:
                kwargs["num_cpus"] = settings.num_cpus
            try:
                init_ray(self.ray, address=address, **kwargs)
            except Exception as exc:
                raise BackendError(f"cannot start or reach the Ray cluster ({address or 'local'}): {exc}") from None
            self._started = True

    def _workers(self) -> tuple[int, dict[str, int], str | None]:
        """(how many workers, actor resources, device override): one per GPU, else one per CPU."""
        res = self.ray.cluster_resources()
        gpus, cpus = int(res.get("GPU", 0)), max(1, int(res.get("CPU", 1)))
        if gpus:
            return self.settings.workers or gpus, {"num_gpus": 1, "num_cpus": 0}, "cuda"
        n = self.settings.workers or cpus
        # each CPU worker gets its share of the cluster's CPUs (Ray sets its thread count to match)
        return n, {"num_cpus": max(1, cpus // n)}, None

    def _actor_options(self, resources: dict[str, int]) -> dict[str, object]:
        n = self.settings.max_retries
        options: dict[str, object] = {**resources, "max_restarts": n, "max_task_retries": n}
        if os.environ.get("RETBENCH_CACHE"):  # the driver's cache root, for workers started before it was set
            options["runtime_env"] = {"env_vars": {"RETBENCH_CACHE": str(Path(os.environ["RETBENCH_CACHE"]).resolve())}}
        return options

    def encode_corpus(self, retriever: Retriever, corpus: Corpus | Sequence[str]) -> dict[str, Any]:
        count, resources, device = self._workers()
        report: dict[str, Any] = {"executor": self.kind, "workers": 0, "encoded": 0, "devices": []}
        workers: dict[int, dict[str, Any]] = {}  # pid -> its latest figures
        t0 = time.perf_counter()
        for enc in encoders_of(retriever):
            if enc.use_cache and type(enc) is not Encoder:  # workers rebuild only sentence-transformers encoders
                report["encoded"] += encode_here(enc, corpus)
                report["in_process"] = [*report.get("in_process", []), f"{type(enc).__name__} (not rebuilt on workers)"]
                continue
            shards = shard_stream(enc, corpus) if enc.use_cache else iter(())
            head = list(itertools.islice(shards, count))  # no more workers than shards
            if not head:
                continue
            options = enc.options() | ({"device": device} if device else {})
            remote = self.ray.remote(**self._actor_options(resources))(EncodeWorker)
            actors = [remote.remote(options) for _ in head]
            try:
                for done in self._spread(actors, itertools.chain(head, shards)):
                    report["encoded"] += done["texts"]
                    report["devices"] = sorted({*report["devices"], done["device"]})
                    workers[done["pid"]] = done
            except self.ray.exceptions.RayError as exc:
                raise BackendError(f"encoding failed on Ray (shards already written are kept): {exc}") from None
            finally:
                for a in actors:
                    self.ray.kill(a)
            report["workers"] = max(report["workers"], len(actors))
        report["encode_docs_per_s"] = rate(report["encoded"], time.perf_counter() - t0)
        report["worker_peak_rss_mib"] = max((w["peak_rss_mib"] for w in workers.values()), default=None)
        report["worker_cpu_seconds"] = round(sum(w["cpu_seconds"] for w in workers.values()), 3) if workers else None
        report["worker_nice"] = sorted({w["nice"] for w in workers.values() if w["nice"] is not None})
        return report

    def _spread(self, actors: list[Any], shards: Iterator[list[str]]) -> Iterator[dict[str, Any]]:
        """Each shard's figures as it finishes; at most two shards queued per actor.

        Shards are drawn from the stream only as actors free up (Ray's ActorPool would draw them all
        at once), so the driver never holds more than a few shards' texts.
        """
        pending: dict[object, object] = {}  # object ref -> the actor running it
        load = {id(a): 0 for a in actors}

        def submit() -> None:
            for a in sorted(actors, key=lambda a: load[id(a)]):
                if load[id(a)] >= 2:
                    break
                shard = next(shards, None)
                if shard is None:
                    return
                pending[a.encode.remote(shard, "document")] = a
                load[id(a)] += 1

        submit()
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1)
            actor = pending.pop(ready[0])
            load[id(actor)] -= 1
            yield self.ray.get(ready[0])
            submit()

    def search(
        self,
        retriever: Retriever,
        queries: Queries,
        todo: Sequence[str],
        k: int,
        batch_size: int,
        on_batch: OnBatch,
        *,
        adapter: str = "",
        params: dict[str, Any] | None = None,
        index_dir: Path | None = None,
    ) -> dict[str, Any]:
        """Batches over actors that load `index_dir`; in process when the adapter cannot save/load."""
        if retriever.answers is not None:  # workers would not bring answers back
            here = InProcess().search(retriever, queries, todo, k, batch_size, on_batch)
            return {**here, "why": "a system that answers (RAG) searches where its answers are kept"}
        if not adapter or index_dir is None or not {"save", "load"} <= retriever.capabilities:
            here = InProcess().search(retriever, queries, todo, k, batch_size, on_batch)
            return {**here, "why": f"adapter {retriever.adapter!r} cannot save and load its index"}
        from ray.util import ActorPool

        warm = warm_query_vectors(retriever, [queries[q] for q in todo])  # workers read the same cache folder
        count, _, _ = self._workers()
        parts = list(batches(queries, todo, batch_size))
        remote = self.ray.remote(**self._actor_options({"num_cpus": 1}))(SearchWorker)
        args = (adapter, params or {}, retriever.name, str(Path(index_dir).resolve()), os.getcwd())
        actors = [remote.remote(*args) for _ in range(min(count, len(parts)) or 1)]
        peak = 0.0
        fell: dict[str, Any] = {}
        try:
            for part, figures in ActorPool(actors).map_unordered(lambda a, b: a.search.remote(b, k), parts):
                on_batch(part)
                peak = max(peak, figures["peak_rss_mib"])
                if "batch_fallbacks" in figures:  # summed over workers (base.isolate_failures)
                    got = figures["batch_fallbacks"]
                    fell = {
                        "batches": fell.get("batches", 0) + got["batches"],
                        "queries": fell.get("queries", 0) + got["queries"],
                        "first_error": fell.get("first_error") or got["first_error"],
                    }
        except self.ray.exceptions.RayError as exc:
            raise BackendError(f"search failed on Ray (answered queries are journaled): {exc}") from None
        finally:
            for a in actors:
                self.ray.kill(a)
        out = {"executor": self.kind, "workers": len(actors), "worker_peak_rss_mib": peak or None, **warm}
        return out | ({"batch_fallbacks": fell} if fell else {})

    def close(self) -> None:
        """Stop the local cluster this executor started (a cluster it joined keeps running)."""
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
