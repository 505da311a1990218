"""Repeated evaluation: the same prebuilt run scored again and again (bootstraps, metric sweeps, tuning loops).

    .venv/bin/python benchmarks/repeat_eval_speed.py                      # 100k x 100 (10M ranked docs)
    .venv/bin/python benchmarks/repeat_eval_speed.py --sizes 10000x1000

`metrics_speed.py`'s inputs and four metrics. Each library runs in a fresh process with its own Run and Qrels
objects built first (untimed); then the first evaluation is timed alone and the later ones (2nd to
--repeats+1th) give their best. ranx is warmed on a tiny run first (numba compiles once per process), so its
first evaluation is its conversion of the objects plus scoring; its later ones reuse what it converted.
retbench keeps the judged gains of a run and a Qrels beside the run (`metrics/judges/qrels.py`), so its later
evaluations skip judging; `--no-reuse` drops that (what each evaluation costs on its own, for comparison).
The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics_speed import METRICS, make_inputs


def worker(tool: str, n_q: int, depth: int, repeats: int, reuse: bool) -> dict:
    run_d, qrels_d = make_inputs(n_q, depth)
    names = METRICS[tool]
    if tool == "retbench":
        from retbench.data import Qrels, Run
        from retbench.evaluation import evaluate
        from retbench.metrics.judges import qrels as judges

        run, qrels = Run.from_dict(run_d), Qrels(qrels_d)

        def go() -> list[float]:
            if not reuse:
                judges._REUSED.clear()
            ev = evaluate(run, qrels, names)
            return [ev.mean(m) for m in names]

    else:
        from ranx import Qrels as RQrels
        from ranx import Run as RRun
        from ranx import evaluate as r_evaluate

        r_evaluate(RQrels({"q": {"a": 1}}), RRun({"q": {"a": 1.0, "b": 0.5}}), names)  # numba compile, untimed
        run, qrels = RRun(run_d), RQrels(qrels_d)

        def go() -> list[float]:
            res = r_evaluate(qrels, run, names)
            return [float(res[m]) for m in names]

    del run_d, qrels_d
    t = time.perf_counter()
    first_means = go()
    first = time.perf_counter() - t
    later = []
    for _ in range(repeats):
        t = time.perf_counter()
        means = go()
        later.append(time.perf_counter() - t)
    return {"tool": tool, "first": first, "later": min(later), "means": means, "first_means": first_means}


def spawn(tool: str, n_q: int, depth: int, repeats: int, reuse: bool) -> dict:
    cmd = [sys.executable, __file__, "--worker", tool, str(n_q), str(depth), str(repeats), str(int(reuse))]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {"tool": tool, "error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000x100", help="comma list of QUERIESxDEPTH")
    ap.add_argument("--repeats", type=int, default=4, help="evaluations after the first")
    ap.add_argument("--no-reuse", action="store_true", help="retbench judges every evaluation afresh")
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; python {sys.version.split()[0]}")
    for size in args.sizes.split(","):
        n_q, depth = (int(x) for x in size.lower().split("x"))
        rows = [spawn(t, n_q, depth, args.repeats, not args.no_reuse) for t in ("retbench", "ranx")]
        print(f"\n## {n_q:,} queries x {depth:,} docs, prebuilt; seconds (first, best of the next {args.repeats})")
        by = {r["tool"]: r for r in rows if "error" not in r}
        for r in rows:
            if "error" in r:
                print(f"  {r['tool']:<9} error: {r['error']}")
                continue
            print(f"  {r['tool']:<9} first {r['first']:7.3f}   later {r['later']:7.3f}")
        if len(by) == 2:
            ours, ranx = by["retbench"], by["ranx"]
            print(
                f"  ranx / retbench: first {ranx['first'] / ours['first']:.1f}x, later {ranx['later'] / ours['later']:.1f}x"
            )
            gap = max(abs(a - b) for a, b in zip(ours["means"], ranx["means"], strict=True))
            same = ours["means"] == ours["first_means"]
            print(f"  means: retbench's later = its first: {same}; max |retbench - ranx| {gap:.1e}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        tool, n_q, depth, repeats, reuse = sys.argv[2:7]
        print(json.dumps(worker(tool, int(n_q), int(depth), int(repeats), reuse == "1")))
    else:
        main()
