"""Columnar run files: evaluating a run from its Arrow IPC (or Parquet) copy against from its TREC text.

    .venv/bin/python benchmarks/run_columns_speed.py                       # 10k x 1,000 (10M ranked docs)
    .venv/bin/python benchmarks/run_columns_speed.py --sizes 2000x1000     # a quick look
    .venv/bin/python benchmarks/run_columns_speed.py --trec-eval /path/to/trec_eval   # the binary beside them

The inputs are `metrics_speed.py`'s (same run, same qrels, four metrics: nDCG@10, R@100, MAP, MRR); the columnar
files are written from the TREC file by `retbench runs convert`'s writer (untimed). Each way in runs in a fresh
subprocess: read run + qrels + evaluate, end to end, best of --repeats (wall and CPU seconds of that best call).
Memory is the whole process's peak RSS during the last timed call (VmHWM, reset before each call: interpreter,
imports and the mapped file's pages included), the figure trec_eval's own peak is comparable with; "growth" is the rise of peak RSS during the first timed call
(VmHWM reset through /proc/self/clear_refs, as metrics_speed.py measures it). pytrec_eval reads the same TREC
files in the same run (the peer of the file path); the trec_eval binary runs when --trec-eval names it
(`trec_eval -m ndcg_cut.10 -m recall.100 -m map -m recip_rank qrels run`: its wall time and peak RSS).
`retbench eval` itself (a fresh process each time: start-up, read, score, print) is timed on both files too, its
peak RSS through /usr/bin/time. The load average is printed before and after.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics_speed import METRICS, _rss_kb, make_inputs, timed, write_files

WAYS = ("trec", "arrow", "parquet")


def worker(tool: str, way: str, folder: Path, repeats: int) -> dict:
    """One tool reading one file form, timed in this (fresh) process."""
    qrels_path = folder / "qrels.trec"
    run_path = folder / {"trec": "run.trec", "arrow": "run.arrow", "parquet": "run.parquet"}[way]
    cpu: list[float] = []
    if tool == "retbench":
        from retbench.evaluation import evaluate
        from retbench.io.trec import read_qrels, read_run

        def go() -> list[float]:
            c = time.process_time()
            ev = evaluate(read_run(run_path), read_qrels(qrels_path), METRICS["retbench"])
            cpu.append(time.process_time() - c)
            return [ev.mean(m) for m in METRICS["retbench"]]

    else:
        import numpy as np
        import pytrec_eval

        def go() -> list[float]:
            c = time.process_time()
            with open(qrels_path) as fq, open(run_path) as fr:
                qrels, run = pytrec_eval.parse_qrel(fq), pytrec_eval.parse_run(fr)
            request = {"ndcg_cut.10", "recall.100", "map", "recip_rank"}
            per_q = pytrec_eval.RelevanceEvaluator(qrels, request).evaluate(run)
            cpu.append(time.process_time() - c)
            return [float(np.mean([v[m] for v in per_q.values()])) for m in METRICS["pytrec_eval"]]

    seconds, growth, means = timed(go, repeats)
    return {
        "tool": tool,
        "way": way,
        "seconds": seconds,
        "cpu_s": min(cpu),
        "growth_mb": growth,
        "peak_rss_mb": _rss_kb("VmHWM") / 1024,  # (reset before the last call: that call's whole-process peak)
        "means": means,
    }


def spawn(tool: str, way: str, folder: Path, repeats: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", tool, way, str(folder), str(repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {
            "tool": tool,
            "way": way,
            "error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1],
        }
    return json.loads(done.stdout.strip().splitlines()[-1])


def timed_command(tool: str, way: str, args: list[str], repeats: int) -> dict:
    """A command's best wall seconds and its peak RSS, through /usr/bin/time (its child is forked from `time`,
    so this process's own size does not leak into the figure, as it would through `ru_maxrss`)."""
    best, peak = float("inf"), 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", *args], capture_output=True, text=True, check=True)
        best = min(best, time.perf_counter() - t)
        peak = max(peak, int(done.stderr.strip().splitlines()[-1]) / 1024)
    return {"tool": tool, "way": way, "seconds": best, "peak_rss_mb": peak}


def cli_rows(folder: Path, trec_eval: str | None, repeats: int) -> list[dict]:
    """`retbench eval` (start-up included) on the text and on the Arrow copy, and the trec_eval binary if given."""
    rows = []
    for way in ("trec", "arrow"):
        command = [sys.executable, "-m", "retbench.cli", "eval", str(folder / "qrels.trec"), str(folder / f"run.{way}")]
        command += ["-f", "trec", "-m", "ndcg@10", "-m", "recall@100", "-m", "map", "-m", "mrr"]
        rows.append(timed_command("retbench eval", way, command, repeats))
    if trec_eval:
        measures = ["-m", "ndcg_cut.10", "-m", "recall.100", "-m", "map", "-m", "recip_rank"]
        command = [trec_eval, *measures, str(folder / "qrels.trec"), str(folder / "run.trec")]
        rows.append(timed_command("trec_eval", "trec", command, repeats))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000x1000", help="comma list of QUERIESxDEPTH")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peers", default="pytrec_eval", help="comma list: pytrec_eval, or none")
    ap.add_argument("--trec-eval", help="path of a trec_eval binary to run beside them")
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; python {sys.version.split()[0]}")
    from retbench.io.run_columns import write_run_columns
    from retbench.io.trec import read_run

    for size in args.sizes.split(","):
        n_q, depth = (int(x) for x in size.lower().split("x"))
        with tempfile.TemporaryDirectory(prefix="retbench-columns-") as tmp:
            folder = Path(tmp)
            run, qrels = make_inputs(n_q, depth)
            write_files(run, qrels, folder)
            del run, qrels
            text_run = read_run(folder / "run.trec")
            write_run_columns(text_run, folder / "run.arrow")
            write_run_columns(text_run, folder / "run.parquet")
            del text_run
            sizes = {w: (folder / f"run.{w}").stat().st_size / 2**20 for w in WAYS}
            rows = [spawn("retbench", way, folder, args.repeats) for way in WAYS]
            rows += [spawn(p, "trec", folder, args.repeats) for p in args.peers.split(",") if p and p != "none"]
            rows += cli_rows(folder, args.trec_eval, args.repeats)
        print(
            f"\n## {n_q:,} queries x {depth:,} docs; file sizes (MiB): "
            + ", ".join(f"{w} {s:.0f}" for w, s in sizes.items())
        )
        texts = {r["tool"]: r for r in rows if r.get("way") == "trec" and "seconds" in r}  # text/this: same tool
        print(
            f"  {'tool':<12} {'from':<8} {'seconds':>8} {'cpu s':>7} {'text/this':>10} {'peak RSS MB':>12} {'growth MB':>10}"
        )
        for r in rows:
            if "error" in r:
                print(f"  {r['tool']:<12} {r['way']:<8} error: {r['error']}")
                continue
            text = texts.get(r["tool"], texts.get("retbench"))
            ratio = text["seconds"] / r["seconds"] if text else float("nan")
            cpu = f"{r['cpu_s']:.3f}" if "cpu_s" in r else "-"
            growth = f"{r['growth_mb']:.0f}" if "growth_mb" in r else "-"
            print(
                f"  {r['tool']:<12} {r['way']:<8} {r['seconds']:>8.3f} {cpu:>7} {ratio:>9.1f}x"
                f" {r['peak_rss_mb']:>12.0f} {growth:>10}"
            )
        means = {(r["tool"], r["way"]): r["means"] for r in rows if "means" in r}
        ref = means.get(("retbench", "trec"))
        if ref:
            worst = max(max(abs(a - b) for a, b in zip(m, ref, strict=True)) for m in means.values())
            print(f"  means agree with retbench from text to {worst:.1e} (nDCG@10, R@100, MAP, MRR)")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        tool, way, folder, repeats = sys.argv[2:6]
        print(json.dumps(worker(tool, way, Path(folder), int(repeats))))
    else:
        main()
