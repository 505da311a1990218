"""Metric engine speed: retbench against pytrec_eval and ranx, same inputs, same run.

    .venv/bin/python benchmarks/metrics_speed.py                      # 10k x 1,000 and 100k x 100
    .venv/bin/python benchmarks/metrics_speed.py --sizes 2000x1000    # a quick look

Four metrics (nDCG@10, R@100, MAP, MRR) over a synthetic run: every query ranks `depth` distinct docs
from a 1M-doc id space with float32-exact scores (so pytrec_eval's 32-bit scores see the same ties),
sorted by score as a retriever emits them (the TREC file writes scores with 6 decimals, as Anserini
and Pyserini do; `--score-format repr` writes 17 significant digits; `--spacing trailing` ends each line with a space); each query has 3 relevant docs (grades 1-2; two of them
ranked, one possibly not) and 2 judged non-relevant ranked docs.

Each measurement runs in a fresh subprocess that first rebuilds the inputs (untimed), so no library
gets another's caches or heap. Three ways in:
- `prebuilt`: the library's own objects already exist (retbench Run/Qrels, ranx Run/Qrels); time evaluate only
  (retbench judges afresh each call: a later call with the same two objects reuses the judged gains, which
  `repeat_eval_speed.py` measures; ranx's repeats keep what its first call converted, as it always did).
  ranx is warmed first on a tiny run (its numba compile time is reported on its own);
- `dicts`: from `{qid: {doc: score}}` / `{qid: {doc: grade}}` in memory, end to end (build objects + evaluate);
- `file`: from the same TREC run and qrels files on disk, end to end (read + evaluate).
Peak memory is the growth of the process's peak RSS during the timed step (VmHWM reset through
/proc/self/clear_refs, so it counts C/C++/numba allocations too). Times are the best of --repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

METRICS = {
    "retbench": ["ndcg@10", "recall@100", "map", "mrr"],
    "ranx": ["ndcg@10", "recall@100", "map", "mrr"],
    "pytrec_eval": ["ndcg_cut_10", "recall_100", "map", "recip_rank"],
}
LABELS = ["nDCG@10", "R@100", "MAP", "MRR"]
CORPUS = 1_000_003  # prime: a stride walk gives distinct docs per query


# -- inputs -----------------------------------------------------------------------------------------------
def make_inputs(n_q: int, depth: int, seed: int = 0) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, CORPUS, n_q)
    stride = rng.integers(1, CORPUS, n_q)
    idx = (start[:, None] + stride[:, None] * np.arange(depth)[None, :]) % CORPUS
    scores = -np.sort(-rng.random((n_q, depth), dtype=np.float32), axis=1).astype(np.float64)
    pool: dict[int, str] = {}
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(n_q):
        ids = [pool.get(i) or pool.setdefault(i, f"d{i}") for i in idx[q].tolist()]
        run[f"q{q}"] = dict(zip(ids, scores[q].tolist(), strict=True))
        # two relevant docs ranked (earlier ranks likelier), one maybe not ranked; two judged non-relevant
        ranked = np.minimum((rng.exponential(depth / 8, 4)).astype(int), depth - 1)
        judged = {ids[ranked[0]]: 2, ids[ranked[1]]: 1}
        judged.setdefault(f"d{int(rng.integers(0, CORPUS))}", 1)
        judged.setdefault(ids[ranked[2]], 0)
        judged.setdefault(ids[ranked[3]], 0)
        qrels[f"q{q}"] = judged
    return run, qrels


def write_files(
    run: dict, qrels: dict, folder: Path, score_format: str = "6f", spacing: str = "single"
) -> tuple[Path, Path]:
    """TREC files; scores with 6 decimals as Anserini/Pyserini write them, or `repr` (17 significant digits);
    `spacing` "trailing" ends every run line with a space (a file the reader must collapse before parsing)."""
    run_path, qrels_path = folder / "run.trec", folder / "qrels.trec"
    fmt = "{:.6f}" if score_format == "6f" else "{!r}"
    end = " \n" if spacing == "trailing" else "\n"
    with open(run_path, "w") as fh:
        for q, docs in run.items():
            fh.writelines(f"{q} Q0 {d} {r} {fmt.format(s)} bench{end}" for r, (d, s) in enumerate(docs.items(), 1))
    with open(qrels_path, "w") as fh:
        for q, docs in qrels.items():
            fh.writelines(f"{q} 0 {d} {g}\n" for d, g in docs.items())
    return run_path, qrels_path


# -- measurement helpers ----------------------------------------------------------------------------------
def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(best seconds, peak RSS growth in MB of the first call, result)."""
    best = float("inf")
    peak = 0.0
    result = None
    for i in range(repeats):
        _reset_peak()
        before = _rss_kb("VmRSS")
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
        if i == 0:
            peak = (_rss_kb("VmHWM") - before) / 1024
    return best, peak, result


# -- one library, one way in (runs in its own process) ----------------------------------------------------
def worker(tool: str, way: str, n_q: int, depth: int, folder: Path, repeats: int) -> dict:
    out: dict = {"tool": tool, "way": way}
    run_d, qrels_d = make_inputs(n_q, depth) if way != "file" else (None, None)
    run_path, qrels_path = folder / "run.trec", folder / "qrels.trec"
    names = METRICS[tool]

    if tool == "retbench":
        from retbench.data import Qrels, Run
        from retbench.evaluation import evaluate
        from retbench.io.trec import read_qrels, read_run

        def means(ev):
            return [ev.mean(m) for m in names]

        if way == "prebuilt":
            out["build_s"], _, built = timed(lambda: (Run.from_dict(run_d), Qrels(qrels_d)), 1)
            run, qrels = built
            # a new Qrels over the same columns each call (about 1 ms): evaluate keeps a (run, qrels) pair's
            # judged gains for the next call with the same two objects, which benchmarks/repeat_eval_speed.py
            # measures; this way times judging afresh, as a first evaluation does
            out["seconds"], out["peak_mb"], ev = timed(lambda: evaluate(run, Qrels(qrels), names), repeats)
        elif way == "dicts":
            out["seconds"], out["peak_mb"], ev = timed(
                lambda: evaluate(Run.from_dict(run_d), Qrels(qrels_d), names), repeats
            )
        else:
            out["seconds"], out["peak_mb"], ev = timed(
                lambda: evaluate(read_run(run_path), read_qrels(qrels_path), names), repeats
            )
        out["means"] = means(ev)

    elif tool == "ranx":
        from ranx import Qrels as RQrels
        from ranx import Run as RRun
        from ranx import evaluate as r_evaluate

        t = time.perf_counter()
        r_evaluate(RQrels({"q": {"a": 1}}), RRun({"q": {"a": 1.0, "b": 0.5}}), names)
        out["compile_s"] = time.perf_counter() - t

        def means(res):
            return [float(res[m]) for m in names]

        if way == "prebuilt":
            out["build_s"], _, built = timed(lambda: (RRun(run_d), RQrels(qrels_d)), 1)
            run, qrels = built
            out["seconds"], out["peak_mb"], res = timed(lambda: r_evaluate(qrels, run, names), repeats)
        elif way == "dicts":
            out["seconds"], out["peak_mb"], res = timed(
                lambda: r_evaluate(RQrels(qrels_d), RRun(run_d), names), repeats
            )
        else:
            out["seconds"], out["peak_mb"], res = timed(
                lambda: r_evaluate(
                    RQrels.from_file(str(qrels_path), kind="trec"), RRun.from_file(str(run_path), kind="trec"), names
                ),
                repeats,
            )
        out["means"] = means(res)

    elif tool == "pytrec_eval":
        import pytrec_eval

        request = {"ndcg_cut.10", "recall.100", "map", "recip_rank"}

        def run_eval(qrels, run):
            per_q = pytrec_eval.RelevanceEvaluator(qrels, request).evaluate(run)
            return [float(np.mean([v[m] for v in per_q.values()])) for m in names]

        def from_files():
            with open(qrels_path) as fq, open(run_path) as fr:
                return run_eval(pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr))

        if way == "prebuilt":
            return {}
        if way == "dicts":
            out["seconds"], out["peak_mb"], out["means"] = timed(lambda: run_eval(qrels_d, run_d), repeats)
        else:
            out["seconds"], out["peak_mb"], out["means"] = timed(from_files, repeats)
    return out


def spawn(tool: str, way: str, n_q: int, depth: int, folder: Path, repeats: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", tool, way, str(n_q), str(depth), str(folder), str(repeats)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {
            "tool": tool,
            "way": way,
            "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}",
        }
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(n_q: int, depth: int, results: list[dict]) -> None:
    print(f"\n## {n_q:,} queries x {depth:,} docs ({n_q * depth / 1e6:.0f}M ranked docs)")
    by = {(r["tool"], r["way"]): r for r in results if r}
    for way in ("prebuilt", "dicts", "file"):
        ours = by.get(("retbench", way), {})
        print(f"\n{way}:")
        print(f"  {'library':<12} {'seconds':>9} {'vs retbench':>12} {'peak MB':>9}  extra")
        for tool in ("retbench", "ranx", "pytrec_eval"):
            r = by.get((tool, way))
            if not r:
                continue
            if "error" in r:
                print(f"  {tool:<12} error: {r['error']}")
                continue
            ratio = r["seconds"] / ours["seconds"] if ours.get("seconds") else float("nan")
            extra = []
            if "build_s" in r:
                extra.append(f"objects built in {r['build_s']:.2f}s (untimed)")
            if "compile_s" in r:
                extra.append(f"numba warm-up {r['compile_s']:.2f}s (untimed)")
            print(f"  {tool:<12} {r['seconds']:>9.3f} {ratio:>11.1f}x {r['peak_mb']:>9.0f}  {'; '.join(extra)}")
    for way in ("dicts", "file"):
        ref = by.get(("retbench", way), {}).get("means")
        if not ref:
            continue
        print(f"\nmeans ({way} way):")
        print(f"  {'library':<12} " + " ".join(f"{m:>10}" for m in LABELS))
        for tool in ("retbench", "ranx", "pytrec_eval"):
            r = by.get((tool, way))
            if r and "means" in r:
                diff = max(abs(a - b) for a, b in zip(r["means"], ref, strict=True))
                print(
                    f"  {tool:<12} "
                    + " ".join(f"{v:>10.6f}" for v in r["means"])
                    + f"   max |diff| vs retbench {diff:.1e}"
                )


PEERS = {"prebuilt": "ranx", "dicts": "pytrec_eval", "file": "pytrec_eval"}  # the peer each goal is set against


def figures(n_q: int, depth: int, results: list[dict]) -> dict[str, dict]:
    """{"metrics.<size>.<way>": ratio to the goal's peer, both times}, for `--figures` (see record_figures)."""
    by = {(r["tool"], r["way"]): r for r in results if r and "seconds" in r}
    out: dict[str, dict] = {}
    for way, peer in PEERS.items():
        ours, theirs = by.get(("retbench", way)), by.get((peer, way))
        if ours and theirs:
            out[f"metrics.{n_q}x{depth}.{way}"] = {
                "figure": f"{theirs['seconds'] / ours['seconds']:.1f}x",
                "retbench_s": round(ours["seconds"], 3),
                "peer": peer,
                "peer_s": round(theirs["seconds"], 3),
            }
    return out


def record_figures(path: str, found: dict[str, dict]) -> None:
    """Merge figures into a JSON file with the date and load average: the block RESULTS.md records and
    the docs quote (tests/unit/test_docs_figures.py checks that they agree)."""
    target = Path(path)
    data = json.loads(target.read_text()) if target.is_file() else {}
    data.update(found)
    data.setdefault("runs", []).append(
        {
            "script": Path(sys.argv[0]).name,
            "date": time.strftime("%Y-%m-%d"),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
    )
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000x1000,100000x100", help="comma list of QUERIESxDEPTH")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tools", default="retbench,ranx,pytrec_eval")
    ap.add_argument("--ways", default="prebuilt,dicts,file")
    ap.add_argument("--score-format", default="6f", choices=["6f", "repr"], help="how the TREC file writes scores")
    ap.add_argument(
        "--spacing",
        default="single",
        choices=["single", "trailing"],
        help="single spaces, or a trailing space on every run line",
    )
    ap.add_argument("--figures", help="merge the ratios of this run into this JSON file (see record_figures)")
    args = ap.parse_args()
    found: dict[str, dict] = {}
    print(
        f"metrics: {', '.join(LABELS)}; python {sys.version.split()[0]}; {os.cpu_count()} CPUs; best of {args.repeats}"
    )
    for size in args.sizes.split(","):
        n_q, depth = (int(x) for x in size.lower().split("x"))
        with tempfile.TemporaryDirectory(prefix="retbench-bench-") as tmp:
            folder = Path(tmp)
            t = time.perf_counter()
            run, qrels = make_inputs(n_q, depth)
            if "file" in args.ways:
                write_files(run, qrels, folder, args.score_format, args.spacing)
            del run, qrels
            print(f"\n(inputs for {size} built in {time.perf_counter() - t:.1f}s)", flush=True)
            results = [
                spawn(tool, way, n_q, depth, folder, args.repeats)
                for way in args.ways.split(",")
                for tool in args.tools.split(",")
            ]
            report(n_q, depth, results)
            found.update(figures(n_q, depth, results))
    if args.figures:
        record_figures(args.figures, found)


if __name__ == "__main__" and sys.argv[1:2] not in (["--all-trec"], ["--all-trec-worker"]):
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        tool, way, n_q, depth, folder, repeats = sys.argv[2:8]
        print(json.dumps(worker(tool, way, int(n_q), int(depth), Path(folder), int(repeats))))
    else:
        main()


# -- every trec_eval measure: `retbench eval -m all_trec` against pytrec_eval's all_trec, from the same files ----
def all_trec_case(n_q: int = 10_000, depth: int = 1_000, repeats: int = 1) -> None:
    """`.venv/bin/python benchmarks/metrics_speed.py --all-trec [10000x1000]`: trec_eval's whole measure suite
    (`all_trec`) from the same TREC run and qrels files, read + evaluate, each tool in a fresh process;
    best-of-`repeats` seconds and the growth of peak RSS during the timed step."""
    with tempfile.TemporaryDirectory(prefix="retbench-bench-") as tmp:
        folder = Path(tmp)
        run, qrels = make_inputs(n_q, depth)
        write_files(run, qrels, folder)
        del run, qrels
        print(f"all_trec, {n_q} queries x {depth} docs, load average {os.getloadavg()[0]:.2f}", flush=True)
        rows = []
        for tool in ("retbench", "pytrec_eval"):
            cmd = [sys.executable, __file__, "--all-trec-worker", tool, str(folder), str(repeats)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        for r in rows:
            print(f"  {r['tool']:<12} {r['seconds']:8.2f} s  peak +{r['peak_mb']:7.0f} MB  {r['measures']} measures")
        print(f"  speed-up {rows[1]['seconds'] / rows[0]['seconds']:.1f}x; load average {os.getloadavg()[0]:.2f}")


def _all_trec_worker(tool: str, folder: Path, repeats: int) -> dict:
    run_path, qrels_path = folder / "run.trec", folder / "qrels.trec"
    if tool == "retbench":
        from retbench.evaluation import evaluate
        from retbench.io.trec import read_qrels, read_run

        def go():
            ev = evaluate(read_run(run_path), read_qrels(qrels_path), ["all_trec"], no_relevant="zero")
            return len(ev.metrics), ev.means()
    else:
        import pytrec_eval

        def go():
            with open(run_path) as fr, open(qrels_path) as fq:
                run, qrels = pytrec_eval.parse_run(fr), pytrec_eval.parse_qrel(fq)
            res = pytrec_eval.RelevanceEvaluator(qrels, {"all_trec"}).evaluate(run)
            return len(next(iter(res.values()))) - 2, None  # runid and relstring are not measures

    seconds, peak, (measures, _) = timed(go, repeats)
    return {"tool": tool, "seconds": seconds, "peak_mb": peak, "measures": measures}


if __name__ == "__main__" and sys.argv[1:2] == ["--all-trec"]:
    size = sys.argv[2] if len(sys.argv) > 2 else "10000x1000"
    all_trec_case(*(int(x) for x in size.lower().split("x")))
elif __name__ == "__main__" and sys.argv[1:2] == ["--all-trec-worker"]:
    print(json.dumps(_all_trec_worker(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))))
