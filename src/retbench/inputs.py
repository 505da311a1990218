"""What compare, gate and report read from the command line: results directories, run files, history entries.

The one place the CLI's inputs are read. Each input yields per-query evaluations plus what the reports
need beside the numbers (query texts, tag groups, failed queries) and the data it was computed on
(dataset, split, corpus and qrels fingerprints), so that numbers from different data are never
compared without a word.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.data import Qrels, Run
from retbench.errors import InputError
from retbench.evaluation import Evaluation, evaluate
from retbench.io.beir import read_queries
from retbench.io.judgements import read_judgements, read_system
from retbench.metrics.coverage import coverage
from retbench.metrics.primary import default_primary
from retbench.metrics.registry import DEFAULT_METRICS, parse_metrics
from retbench.results import history_read, load_results
from retbench.results.caveats import HOLE_METRICS, Caveat, system_holes, table_means
from retbench.results.layout import all_pairs, split_key
from retbench.results.read import load_qrels, recorded_depth

#: what a results directory was computed on, per dataset: name, split, corpus and qrels fingerprints (None: not
#: recorded); only compared and printed
DataIdentity = dict[str, object]
#: how a system's numbers were made: depth (int or None), relevance level (int), no-relevant policy and mode (str)
Settings = dict[str, int | str | None]

#: (input label, evaluation, failed qid -> status, search depth, (run, judgements)) of one system read from an input
Read = tuple[str, Evaluation, dict[str, str], int | None, tuple[Run, Qrels | Mapping[str, Any]]]


@dataclass
class Loaded:
    """Systems read from the command line's inputs, with what the reports need beside the numbers."""

    evaluations: list[Evaluation]  # in input order
    sources: dict[str, str]  # system -> where it came from
    queries: dict[str, str] = field(default_factory=dict)  # query id -> text
    groups: dict[str, list[str]] = field(default_factory=dict)  # tag -> query ids
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  # system -> failed qid -> status
    input_systems: list[list[str]] = field(default_factory=list)  # systems of each input, in order
    data: dict[str, list[DataIdentity]] = field(default_factory=dict)  # results dir -> datasets it was run on
    settings: dict[str, Settings] = field(default_factory=dict)  # system -> how it was searched and counted
    broken: dict[str, str] = field(default_factory=dict)  # system that failed as a whole -> its error
    # system -> its run and its judgements: the Qrels a run file was scored against, or the results manifest's
    # data block its dataset's qrels are read from when asked (`caveat`)
    judged_by: dict[str, tuple[Run, Qrels | Mapping[str, Any]]] = field(default_factory=dict)

    def get(self, system: str) -> Evaluation:
        for ev in self.evaluations:
            if ev.system == system:
                return ev
        if system in self.broken:
            raise InputError(f"system {system!r} failed as a whole: {self.broken[system]}", field="system")
        raise InputError(
            f"unknown system {system!r} (have: {', '.join(e.system for e in self.evaluations)})", field="system"
        )

    def one(self, system: str | None, role: str) -> Evaluation:
        """The single system of an input, or the named one; several without a name is an error."""
        if system is not None:
            return self.get(system)
        if len(self.evaluations) != 1:
            have = ", ".join(e.system for e in self.evaluations)
            raise InputError(
                f"the {role} holds several systems ({have}); name one with --{role}-system", field=f"{role}-system"
            )
        return self.evaluations[0]

    def caveat(self, system: str) -> Caveat:
        """What weakens the system's numbers (results/caveats.py): its coverage counts, and its holes from its run
        and qrels (a results directory's are read from its dataset now; none when it cannot be found)."""
        ev = self.get(system)
        stored = table_means(ev, [m for m in ev.metrics if m in HOLE_METRICS])
        run, judged = self.judged_by.get(system, (None, None))
        qrels = judged if isinstance(judged, Qrels) or judged is None else load_qrels(judged)
        return Caveat(system, dict(ev.coverage or {}), system_holes(system, stored, ev, run, qrels))

    def default_pairs(
        self, baseline: str | None = None, *, every_pair: bool = False, config: Mapping[str, object] | None = None
    ) -> list[tuple[str, str]]:
        """The pairs a comparison tests: `every_pair` all pairs (within each dataset); a `baseline` each system
        against it; two inputs holding the same systems pair by name; else each system against the config's
        `baseline:` (a system name; in a multi-dataset results directory, that system on each dataset), or
        the first system."""
        names = [e.system for e in self.evaluations]
        if every_pair:
            return all_pairs(names)
        if baseline is not None:
            return all_pairs(names, baseline)
        if len(self.input_systems) == 2:
            first, second = self.input_systems
            bare = [[s.rsplit("/", 1)[-1] for s in side] for side in (first, second)]
            if len(first) > 1 and sorted(bare[0]) == sorted(bare[1]):
                return [(first[bare[0].index(s)], second[bare[1].index(s)]) for s in bare[0]]
        if not names:
            return []
        wanted = (config or {}).get("baseline")
        base = next((n for n in names if wanted in (n, split_key(n)[1])), names[0])
        # keys from two inputs (`<input>/<system>`) read like dataset keys: when that pairs nothing, pair them all
        return all_pairs(names, base) or [(base, n) for n in names if n != base]


def groups_from_queries(queries: Mapping[str, str] | None) -> dict[str, list[str]]:
    """Tag -> query ids from query metadata (`tags` list or string, and `category` as `category:<c>`)."""
    groups: dict[str, list[str]] = {}
    for qid, meta in (getattr(queries, "metadata", None) or {}).items():
        if not isinstance(meta, Mapping):
            continue
        tags = meta.get("tags") or []
        for tag in [tags] if isinstance(tags, str) else tags:
            groups.setdefault(str(tag), []).append(qid)
        if meta.get("category"):
            groups.setdefault(f"category:{meta['category']}", []).append(qid)
    return groups


def primary_metrics(config: Mapping[str, Any] | None, shared: Sequence[str]) -> list[str]:
    """The metrics a comparison tests by default: the config's `primary:` list, else the first of its metrics that
    ranks systems (`metrics.primary.default_primary`), else that of the metrics the inputs share -- kept to those every
    input has."""
    cfg = config or {}
    first = default_primary([str(m) for m in cfg.get("metrics") or []])
    wanted = cfg.get("primary") or ([first] if first else [])
    named = [m for m in canonical_metrics([str(m) for m in wanted]) or [] if m in shared]
    fallback = default_primary(list(shared))
    return named or ([fallback] if fallback else [])


def canonical_metrics(names: Sequence[str] | None) -> list[str] | None:
    """Metric names as the registry spells them (None stays None: 'every metric the inputs share')."""
    if not names:
        return None

    return [s.name for s in parse_metrics(list(names))]


def load_systems(
    paths: Sequence[str | Path],
    *,
    qrels: str | Path | Qrels | None = None,
    metrics: Sequence[str] | None = None,
    queries: str | Path | None = None,
    systems: Sequence[str] | None = None,
    check_metrics: bool = True,
) -> Loaded:
    """Read results directories (every system, or those named in `systems`) and/or TREC run files.

    Run files are scored against `qrels` with `metrics` (default: the runner's default metrics);
    with `check_metrics`, a metric some results directory lacks is an error. A system name that
    occurs in two inputs is prefixed by its input's folder or file name.
    """

    wanted = canonical_metrics(metrics)
    # (input label, evaluation, failed qid -> status, search depth)
    raw: list[Read] = []
    out = Loaded([], {})
    judged: Qrels | None = None  # the --qrels every run file is scored against, read once
    short = [Path(g).name if Path(g).is_dir() else Path(g).stem for g in paths]
    for given, name in zip(paths, short, strict=True):
        p = Path(given)
        label = name if short.count(name) == 1 else str(p)
        if p.is_dir():
            raw += _read_folder(p, label, systems, out)
        elif p.is_file():
            if judged is None:
                judged = _judgements(p, qrels)
            ev, run = _evaluate_file(p, judged, wanted)
            raw.append((label, ev, {}, run.depth, (run, judged)))
            out.data[str(p)] = [dict.fromkeys(_DATA_KEYS) | {"qrels_fingerprint": judged.fingerprint()}]
        else:
            raise InputError("not found: expected a results directory or a TREC run file", path=p)
    if queries is not None:
        q = read_queries(queries)
        out.queries.update(dict(q.items()))
        _merge_groups(out.groups, groups_from_queries(q))
    counts: dict[str, int] = {}
    for _, ev, _, _, _ in raw:
        counts[ev.system] = counts.get(ev.system, 0) + 1
    per_input: dict[str, list[str]] = {}
    for label, ev, failed, searched, judged_by in raw:
        if counts[ev.system] > 1:
            ev.system = f"{label}/{ev.system}"
        out.evaluations.append(ev)
        out.sources[ev.system] = label
        out.failures[ev.system] = failed
        out.settings[ev.system] = settings_of(ev, searched)
        out.judged_by[ev.system] = judged_by
        per_input.setdefault(label, []).append(ev.system)
    out.input_systems = list(per_input.values())
    if wanted is not None and check_metrics:
        for ev in out.evaluations:
            for m in wanted:
                if m not in ev.metrics:
                    raise InputError(
                        f"metric {m!r} is absent from system {ev.system!r} (has: {', '.join(ev.metrics)})",
                        path=out.sources[ev.system],
                        field="metric",
                    )
    return out


def _read_folder(p: Path, label: str, systems: Sequence[str] | None, out: Loaded) -> list[Read]:
    """A results folder's systems (all, or those named) as (label, evaluation, failed qid -> status, depth); its
    query texts, tag groups, data identity and the systems that failed as a whole go into `out`."""
    res = load_results(p)
    names = [s for s in res.systems if systems is None or s in systems]
    broken = {s: str(res[s].error) for s in names if res[s].failed}  # no per-query table to read
    if systems is not None and broken:
        first = next(iter(broken))
        raise InputError(f"system {first!r} failed as a whole: {broken[first]}", path=p, field="system")
    out.broken.update(broken)
    names = [s for s in names if s not in broken]
    if not names:
        have = ", ".join(res.systems)
        raise InputError(
            f"none of the systems {', '.join(systems or [])} is in these results (have: {have})",
            path=p,
            field="system",
        )
    rows: list[Read] = []
    for s in names:
        ev = res.evaluation(s)
        run = res.run(s)
        failed = {q: st.value for q, st in run.status.items() if st.failed}
        rows.append((label, ev, failed, res.depth(s, run), (run, res.manifest.data)))
    out.queries.update({q: res.queries[q] for q in res.queries})
    _merge_groups(out.groups, groups_from_queries(res.queries))
    out.data[str(p)] = data_identity(res.manifest.data)
    return rows


_DATA_KEYS = ("name", "split", "corpus_fingerprint", "qrels_fingerprint")


def data_identity(manifest: Mapping[str, object]) -> list[DataIdentity]:
    """What a results directory was computed on: per dataset its name, split and corpus/qrels fingerprints."""
    datasets = manifest.get("datasets") if isinstance(manifest, Mapping) else None
    if not isinstance(datasets, (list, tuple)):
        return []
    return [{k: d.get(k) for k in _DATA_KEYS} for d in datasets if isinstance(d, Mapping)]


def _agree(a: list[DataIdentity], b: list[DataIdentity]) -> bool:
    """Same datasets in the same order, on every field both sides know (None: not recorded)."""
    return len(a) == len(b) and all(
        x.get(k) is None or y.get(k) is None or x.get(k) == y.get(k)
        for x, y in zip(a, b, strict=True)
        for k in _DATA_KEYS
    )


def _show_data(v: list[DataIdentity]) -> str:
    def one(d: DataIdentity) -> str:
        if d.get("name") is None:  # a run file: only the --qrels it was scored against is known
            return f"scored on --qrels {d.get('qrels_fingerprint')}"
        return f"{d['name']}/{d['split']} (corpus {d['corpus_fingerprint']}, qrels {d['qrels_fingerprint']})"

    return ", ".join(one(d) for d in v) or "no dataset recorded"


def different_data(*loaded: Loaded) -> str | None:
    """None when every input was computed on the same corpus and qrels, else what differs.

    Numbers from different corpora or judgements are not comparable: a drop from 0.72 to 0.16 may
    be the data, not the system. Results directories and history entries carry the dataset, split
    and corpus/qrels fingerprints; a run file carries the fingerprint of the --qrels it was scored
    against, so it is checked against a directory's qrels (its corpus is not known).
    """
    data: dict[str, list[DataIdentity]] = {}
    for one in loaded:
        data.update(one.data)
    items = list(data.values())
    if all(_agree(a, b) for i, a in enumerate(items) for b in items[i + 1 :]):
        return None
    return "; ".join(f"{where}: {_show_data(v)}" for where, v in data.items())


# -- how numbers were searched and counted: results that differ here are not comparable as they stand --
SETTING_LABELS = {
    "depth": "depth",
    "relevance_level": "relevance level",
    "no_relevant": "no-relevant policy",
    "mode": "counting mode",
}


def settings_of(ev: Evaluation, depth: int | None) -> Settings:
    """How a system's numbers were made: the search depth (None: not recorded) and the evaluation settings."""
    return {
        "depth": depth,
        "relevance_level": ev.relevance_level,
        "no_relevant": ev.no_relevant,
        "mode": ev.mode,
    }


Side = tuple[str, str, "Loaded"]  # (how a message names it, system, the input holding it)


def different_settings(
    pairs: Sequence[tuple[Side, Side]], metrics: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """(notes, refusals): how the two sides of each pair differ in depth, relevance level or counting.

    Refused, as numbers that cannot be compared: a different relevance level or no-relevant policy
    (the same query is counted with other relevant documents, or with another value when it has none),
    and a different depth when a compared metric looks deeper than the shallower side searched (a
    metric with no cutoff, or a cutoff above that depth: recall@100 of a depth-10 run is its recall@10).
    Only said: a different counting mode (comparisons align both sides on the union of their queries
    and count an unanswered query as 0 either way), and a different depth no compared metric reaches.
    """
    notes: list[str] = []
    refusals: list[str] = []
    for (la, a, ina), (lb, b, inb) in pairs:
        sa, sb = ina.settings.get(a), inb.settings.get(b)
        if sa is None or sb is None:
            continue
        for key, label in SETTING_LABELS.items():
            va, vb = sa.get(key), sb.get(key)
            if va is None or vb is None or va == vb:
                continue
            line = f"{label} {va} ({la}) vs {vb} ({lb})"
            if key == "depth":
                shared = metrics or [m for m in ina.get(a).metrics if m in inb.get(b).metrics]
                shallower = min(int(va), int(vb))
                reach = _deeper_than(shared, shallower)
                if reach:
                    line += f": {', '.join(reach)} look{'s' if len(reach) == 1 else ''} deeper than {shallower}"
                (refusals if reach else notes).append(line)
            else:
                (notes if key == "mode" else refusals).append(line)
    return list(dict.fromkeys(notes)), list(dict.fromkeys(refusals))


Note = Callable[[str], None]


def check_same_data(allowed: bool, *loaded: Loaded, note: Note) -> None:
    """Refuse results computed on different data unless `allowed` (then say it through `note`)."""
    why = different_data(*loaded)
    if why is None:
        return
    if not allowed:
        raise InputError(
            f"results were computed on different data ({why}); pass --allow-different-data to go on anyway"
        )
    note(f"--allow-different-data: results were computed on different data ({why})")


def check_same_settings(
    allowed: bool, pairs: Sequence[tuple[Side, Side]], metrics: Sequence[str] | None, *, note: Note
) -> None:
    """Say how the compared sides differ in depth, relevance level or counting; refuse what cannot be
    compared (`different_settings`) unless `allowed` (then say it through `note`)."""
    notes, refusals = different_settings(pairs, metrics)
    for line in notes:
        note(f"results differ in {line}")
    if not refusals:
        return
    why = "; ".join(refusals)
    if not allowed:
        raise InputError(
            f"results were computed with different settings ({why}), so their numbers are not comparable; "
            "rerun one side with the other's settings, or pass --allow-different-settings to go on anyway"
        )
    note(f"--allow-different-settings: results were computed with different settings ({why})")


def _deeper_than(metrics: Sequence[str], depth: int) -> list[str]:
    """The ranking metrics a ranking cut at `depth` changes: no cutoff, or a cutoff above it (answer-side
    metrics score the answer, not the ranking, and are left out)."""
    out = []
    for name in metrics:
        try:
            spec = parse_metrics([name])[0]
        except InputError:
            continue
        if spec.row.answer_side:
            continue
        if spec.k is None or spec.k > depth:
            out.append(spec.name)
    return out


def load_history(
    spec: str, path: str | Path | None = None, *, candidate: tuple[str | Path, str] | None = None
) -> tuple[Loaded, history_read.Entry]:
    """A `history:<which>` baseline as Loaded (its stored per-query tables and data identity) and its entry;
    with a `candidate` (results directory, system), last-pass/last is a point of the candidate's own key."""
    entry = history_read.resolve(spec, path, candidate=candidate)
    evs = history_read.evaluations(entry, path)
    where = f"history run {entry.id} ({entry.results_dir})"
    data = {where: [{k: d.get(k) for k in _DATA_KEYS} for d in entry.datasets]}
    settings = {e.system: settings_of(e, recorded_depth(e.coverage)) for e in evs}
    return Loaded(evs, {e.system: where for e in evs}, data=data, settings=settings), entry


def _merge_groups(into: dict[str, list[str]], more: Mapping[str, Sequence[str]]) -> None:
    for tag, qids in more.items():
        have = into.setdefault(tag, [])
        have.extend(q for q in qids if q not in have)


def _judgements(path: Path, qrels: str | Path | Qrels | None) -> Qrels:
    """The --qrels run files are scored against (any form `read_judgements` reads, or Qrels already)."""
    if qrels is None:
        raise InputError("a run file needs --qrels to be scored", path=path, field="qrels")
    return qrels if isinstance(qrels, Qrels) else read_judgements(qrels)[0]


def _evaluate_file(path: Path, judged: Qrels, metrics: Sequence[str] | None) -> tuple[Evaluation, Run]:
    """Score one run file (TREC run or system outputs, with their answer side) against the judgements;
    with the run (its depth, its longest ranking, is the only one a run file records)."""
    run, texts, answers = read_system(path)
    ev = evaluate(
        run,
        judged,
        list(metrics or DEFAULT_METRICS),
        system=run.name,
        texts=texts or None,
        answers=answers or None,
    )
    ev.coverage = coverage(ev, run)  # a bare run file has no metrics.json: computed here, once
    return ev, run
