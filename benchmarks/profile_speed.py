"""Where the time goes on the metric and BM25 hot paths: one cProfile run per path, folded into stages.

    .venv/bin/python benchmarks/profile_speed.py metrics --sizes 10000x1000,100000x100
    .venv/bin/python benchmarks/profile_speed.py bm25
    .venv/bin/python benchmarks/profile_speed.py bm25-wall --repeat 7
    .venv/bin/python benchmarks/profile_speed.py floors --sizes 10000x1000,100000x100

Each path runs once untimed (warm-up: imports, caches), then once under cProfile. A stage is the
cumulative time of the functions named for it, less the stages nested inside it, so the stages of a
path add up to its total ("other" is the rest: the glue between stages). cProfile adds a little to
every Python-level call; the hot paths here make few of those, so the split is what matters, not
the exact seconds (benchmarks/metrics_speed.py and bm25_speed.py give those, with their peers).

Metric stages (from a TREC file, from `{qid: {doc: score}}` dicts, or prebuilt objects):
  parse      Arrow's CSV reader and the checks on its columns (control bytes, empty fields, finite scores)
  factorise  query segments, 64-bit doc keys, the qrels' columns; for dicts, reading the scores out
  validate   the id and score checks of a run built from dicts
  order      sorting check, duplicate check and tie-breaking (`Run._normalize`)
  judge      finding every judged (query, doc) pair in the run
  aggregate  the metrics and their means (the rest of `evaluate`)
BM25 stages: tokenize, index (term counts and the score matrix), score + top-k (bm25s's retrieve),
run (retbench's Run or the raw path's dict of results).

`bm25-wall` splits the same two BM25 paths by wall clock instead (`time.perf_counter` around each step, no
profiler, the median of --repeat runs after one warm-up), because cProfile's cost per Python-level call
misleads where one path makes many more calls than the other. retbench's steps are those `index` and
`search` take, called one by one (the same functions, so the split follows the code); the rows
"index() as called" and "search() as called" time the real calls, so the split can be held against them.

`floors` times (CPU seconds, best of 5, no profiler) what any checked evaluation of the same input
must do at least, so a goal can be held against arithmetic rather than hope: from dicts, touching
every ranked id object once and reading every score into an array; prebuilt from dicts, one dict
lookup per judged (query, doc) pair in the run's own mappings (where judged docs are ranked). Beside
them, in the same process: the cheapest pass CPython offers that proves every id is text (`str.join`
over each ranking, a block of rankings at a time: the one C loop that checks each item's type without a
Python-level call per id); the checked floor, that join plus the score read plus the judged lookups (a
checked evaluation proves its ids are text, since an id 7 never equals a judged "7", and finds its judged
documents); and the dicts path itself end to end (`Run.from_dict`, `Qrels`, `evaluate` of the four
metrics), as a ratio to the dicts floor and to the checked floor.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

Func = tuple[str, str]  # (file name ending, function name)
# (name, functions, stages nested inside those functions, subtracted); a name given twice adds up
Stage = tuple[str, list[Func], list[str]]

METRIC_NAMES = ["ndcg@10", "recall@100", "map", "mrr"]

METRIC_STAGES: list[Stage] = [
    ("parse", [("io/trec.py", "_read_columns")], []),
    (
        "validate",
        [("data/ids.py", "plain_rankings_fine"), ("data/ids.py", "first_bad_id"), ("data/ids.py", "check_rankings")],
        [],
    ),
    ("order", [("data/run.py", "_normalize")], []),
    ("judge", [("judges/qrels.py", "judge_qrels")], []),
    ("aggregate", [("evaluation/scoring.py", "evaluate")], ["judge"]),
    (
        "factorise",
        [
            ("io/trec.py", "read_run"),
            ("io/trec.py", "read_qrels"),
            ("data/run.py", "from_dict"),
            ("data/qrels.py", "__init__"),
        ],
        ["parse", "validate", "order"],
    ),
]

BM25_STAGES: list[Stage] = [
    ("tokenize", [("retrievers/tokenize.py", "token_array"), ("bm25s/tokenization.py", "tokenize")], []),
    ("score + top-k", [("bm25s/__init__.py", "retrieve")], []),
    ("index", [("retrievers/bm25.py", "index")], ["tokenize"]),
    ("index", [("bm25s/__init__.py", "index")], []),
    ("run", [("retrievers/bm25.py", "search"), ("profile_speed.py", "raw_search")], ["tokenize", "score + top-k"]),
]


def _cumulative(stats: pstats.Stats, funcs: list[Func]) -> float:
    """Cumulative seconds of the named functions (outermost calls only: recursion is counted once)."""
    total = 0.0
    for (filename, _, name), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if any(filename.endswith(f) and name == n for f, n in funcs):
            total += cum
    return total


def staged(fn: Callable[[], Any], stages: list[Stage]) -> dict[str, float]:
    """{stage: seconds} of one profiled call of `fn`, plus "other" and "total"."""
    fn()  # warm-up: imports, stemmer memo, first-touch page faults
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    fn()
    prof.disable()
    total = time.perf_counter() - start
    stats = pstats.Stats(prof)
    raw: dict[str, float] = {}
    for name, funcs, _ in stages:
        raw[name] = raw.get(name, 0.0) + _cumulative(stats, funcs)
    out: dict[str, float] = {}
    for name, funcs, minus in stages:  # a stage named twice adds up its entries
        nested = sum(raw[m] for m in minus)
        out[name] = out.get(name, 0.0) + max(_cumulative(stats, funcs) - nested, 0.0)
    out["other"] = max(total - sum(out.values()), 0.0)
    out["total"] = total
    return out


def show(title: str, rows: dict[str, dict[str, float]]) -> None:
    names = [n for n in next(iter(rows.values()))]
    print(f"\n{title}")
    print(f"| path | {' | '.join(names)} |")
    print(f"|---|{'---:|' * len(names)}")
    for path, row in rows.items():
        print(f"| {path} | {' | '.join(f'{row[n]:.3f}' for n in names)} |")


def metric_rows(n_q: int, depth: int) -> dict[str, dict[str, float]]:
    """Stage times of the file, dicts and prebuilt ways at one size (the inputs of metrics_speed.py)."""
    from metrics_speed import make_inputs, write_files
    from retbench.data import Qrels, Run
    from retbench.evaluation import evaluate
    from retbench.io.trec import read_qrels, read_run

    run_d, qrels_d = make_inputs(n_q, depth)
    with tempfile.TemporaryDirectory(prefix="retbench-prof-") as tmp:
        run_path, qrels_path = write_files(run_d, qrels_d, Path(tmp))
        prebuilt = (Run.from_dict(run_d), Qrels(qrels_d))
        ways: dict[str, Callable[[], Any]] = {
            "file": lambda: evaluate(read_run(run_path), read_qrels(qrels_path), METRIC_NAMES),
            "dicts": lambda: evaluate(Run.from_dict(run_d), Qrels(qrels_d), METRIC_NAMES),
            "prebuilt": lambda: evaluate(*prebuilt, METRIC_NAMES),
        }
        return {way: staged(fn, METRIC_STAGES) for way, fn in ways.items()}


def profile_metrics(sizes: list[str]) -> None:
    for size in sizes:
        n_q, depth = (int(x) for x in size.lower().split("x"))
        show(f"metrics, {n_q:,} x {depth:,}: seconds per stage (cProfile)", metric_rows(n_q, depth))


def _cpu_best(fn: Callable[[], Any], repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def floors(sizes: list[str]) -> None:
    """CPU seconds of the least work any checked evaluation of these inputs does (see the docstring)."""
    from collections import deque
    from itertools import chain, repeat

    import numpy as np

    from metrics_speed import make_inputs
    from retbench.data import Qrels, Run
    from retbench.data.ids import IDS_PER_BLOCK
    from retbench.evaluation import evaluate

    print(
        "| size | touch every id | read every score | both (dicts floor) | join every id | judged lookups (prebuilt floor)"
        " | checked floor | dicts path | / dicts floor | / checked floor |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        n_q, depth = (int(x) for x in size.lower().split("x"))
        run_d, qrels_d = make_inputs(n_q, depth)
        rankings = list(run_d.values())
        n = sum(map(len, rankings))
        maps = [run_d[q] for q in qrels_d]
        owners = [m for m, judged in zip(maps, qrels_d.values(), strict=True) for _ in judged]
        judged = [d for j in qrels_d.values() for d in j]
        step = max(1, IDS_PER_BLOCK * len(rankings) // max(n, 1))  # rankings per block, as the check blocks them
        blocks = [rankings[i : i + step] for i in range(0, len(rankings), step)]
        touch = _cpu_best(lambda: deque(chain.from_iterable(rankings), maxlen=0))  # noqa: B023
        read = _cpu_best(
            lambda: np.fromiter(chain.from_iterable(map(dict.values, rankings)), dtype=np.float64, count=n)  # noqa: B023
        )
        join = _cpu_best(lambda: deque((" ".join(map(" ".join, b)) for b in blocks), maxlen=0))  # noqa: B023
        look = _cpu_best(
            lambda: np.fromiter(map(dict.get, owners, judged, repeat(np.nan)), dtype=np.float64, count=len(judged))  # noqa: B023
        )
        path = _cpu_best(lambda: evaluate(Run.from_dict(run_d), Qrels(qrels_d), METRIC_NAMES))  # noqa: B023
        floor, checked = touch + read, join + read + look
        print(
            f"| {n_q:,} x {depth:,} | {touch:.3f} | {read:.3f} | {floor:.3f} | {join:.3f} | {look:.3f} | {checked:.3f}"
            f" | {path:.3f} | {path / floor:.2f}x | {path / checked:.2f}x |"
        )


def profile_bm25(corpus: str) -> None:
    import bm25s
    import Stemmer

    from retbench.io.beir import read_beir
    from retbench.retrievers import create

    ds = read_beir(corpus)
    queries = ds.queries.subset(list(ds.split("test")))
    texts, qtexts = ds.corpus.joined_texts(), list(queries.values())
    retriever = create("bm25s")
    retriever.index(ds.corpus)
    stem = Stemmer.Stemmer("english")
    raw = bm25s.BM25(k1=1.5, b=0.75)
    raw.index(bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False), show_progress=False)

    def raw_index() -> None:
        bm25s.BM25(k1=1.5, b=0.75).index(
            bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False), show_progress=False
        )

    def raw_search() -> dict[str, dict[str, float]]:
        ids = ds.corpus.ids
        qtok = bm25s.tokenize(qtexts, stopwords="en", stemmer=stem, return_ids=False, show_progress=False)
        docs, scores = raw.retrieve(qtok, k=100, show_progress=False)
        return {
            q: {ids[d]: s for d, s in zip(docs[i].tolist(), scores[i].tolist(), strict=True)}
            for i, q in enumerate(queries)
        }

    rows = {
        "retbench index": staged(lambda: create("bm25s").index(ds.corpus), BM25_STAGES),
        "raw bm25s index": staged(raw_index, BM25_STAGES),
        "retbench search": staged(lambda: retriever.search(queries, 100), BM25_STAGES),
        "raw bm25s search": staged(raw_search, BM25_STAGES),
    }
    show(f"BM25 on SciFact ({len(texts):,} docs, {len(qtexts)} queries, k 100): seconds per stage (cProfile)", rows)


class Clock:
    """Wall-clock sections: each call records the seconds since the previous one under a name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now


def wall_bm25(corpus: str, repeat: int) -> None:
    """Median wall-clock seconds of each step of retbench's bm25s index + search and of raw bm25s's."""
    import statistics

    import bm25s
    import Stemmer

    from retbench.io.beir import read_beir
    from retbench.retrievers import create
    from retbench.retrievers.bm25 import TOKENIZE_BATCH
    from retbench.retrievers.postings import Postings

    ds = read_beir(corpus)
    queries = ds.queries.subset(list(ds.split("test")))
    qtexts = list(queries.values())

    def ours() -> dict[str, float]:
        c = Clock()
        r = create("bm25s")
        c("create (tokenizer, stemmer, stopwords)")
        batches = list(ds.corpus.joined_batches(TOKENIZE_BATCH))
        c("join title + text")
        vocab: dict[str, int] = {}
        pairs = [r.tokenizer.token_array(texts, vocab, grow=True) for texts in batches]
        c("tokenize to (doc, term id)")
        counts, first = [], 0
        for texts, (owner, term) in zip(batches, pairs, strict=True):
            counts.append(Postings.from_pairs(owner, term, len(texts), first))
            first += len(texts)
        postings = Postings.concat(counts)
        c("term counts")
        ds.corpus.fingerprint()
        ids = [str(i) for i in ds.corpus.ids]
        c("ids + corpus fingerprint")
        r._vocab, r._ids = vocab, ids
        r._build(postings)
        c("score matrix")
        tokens = r.tokenizer.tokenize_ids(qtexts, vocab, grow=False)
        c("search: tokenize queries")
        r._search_tokens(tokens, 100)
        c("search: score + top-k")
        fresh = create("bm25s")
        c.seconds["index() as called"] = _timed(lambda: fresh.index(ds.corpus))
        c.seconds["search() as called"] = _timed(lambda: fresh.search(queries, 100))
        return c.seconds

    def raw() -> dict[str, float]:
        c = Clock()
        stem = Stemmer.Stemmer("english")
        c("create (tokenizer, stemmer, stopwords)")
        texts, ids = ds.corpus.joined_texts(), list(ds.corpus.ids)
        c("join title + text")
        tokenized = bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False)
        c("tokenize to (doc, term id)")
        model = bm25s.BM25(k1=1.5, b=0.75)
        model.index(tokenized, show_progress=False)
        c("term counts + score matrix (BM25.index)")
        qtok = bm25s.tokenize(qtexts, stopwords="en", stemmer=stem, return_ids=False, show_progress=False)
        c("search: tokenize queries")
        docs, scores = model.retrieve(qtok, k=100, show_progress=False)
        c("search: score + top-k")
        {
            q: {ids[d]: s for d, s in zip(docs[i].tolist(), scores[i].tolist(), strict=True)}
            for i, q in enumerate(queries)
        }
        c("search: results dict")
        return c.seconds

    for name, fn in (("retbench bm25s", ours), ("raw bm25s", raw)):
        runs = [fn() for _ in range(repeat + 1)][1:]  # the first is a warm-up (imports, first-touch pages)
        print(f"\n{name}: median wall-clock seconds of {repeat} runs (SciFact, {len(qtexts)} queries, k 100)")
        print("| step | seconds |\n|---|---:|")
        for step in runs[0]:
            print(f"| {step} | {statistics.median(r[step] for r in runs):.4f} |")


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["metrics", "bm25", "bm25-wall", "floors"])
    ap.add_argument("--repeat", type=int, default=7, help="bm25-wall: runs per path (median)")
    ap.add_argument("--sizes", default="10000x1000,100000x100")
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[1] / "corpora" / "scifact"))
    args = ap.parse_args()
    if args.what == "metrics":
        profile_metrics(args.sizes.split(","))
    elif args.what == "floors":
        floors(args.sizes.split(","))
    elif args.what == "bm25-wall":
        wall_bm25(args.corpus, args.repeat)
    else:
        profile_bm25(args.corpus)


if __name__ == "__main__":
    main()
