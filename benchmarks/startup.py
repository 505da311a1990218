"""Start-up cost: `retbench eval` on a one-line run and `retbench --help`, in CPU seconds, beside their floors.

A script that scores many small runs (per fold, per topic, in a CI loop) pays the start-up on every call, so the
figure that matters is the CPU (user + sys) of the whole process, read from the operating system's accounting of
the child (`os.wait4`), not wall time, which a loaded machine inflates. Each command runs `--repeat` times; the
median is reported (and the minimum beside it). The floors are what no Python CLI over these libraries can go
below: the bare interpreter (`python -c pass`), the interpreter importing NumPy (retbench's arrays; once as is
and once with the OpenBLAS setting the CLI makes, `retbench.cli.BLAS_SPIN`: OpenBLAS's idle worker otherwise
busy-waits about 0.05 CPU s), and the interpreter running a one-command Typer app with path arguments (Typer
parses the command line and converts each value with pydantic). The trec_eval binary, where one is found
(`--trec-eval`, or on PATH), runs the same files.

Every child runs without PYTHONDONTWRITEBYTECODE and once before timing, so compiled bytecode exists as it does
after `pip install`; the figures are for a warm file cache.

    .venv/bin/python benchmarks/startup.py [--repeat 7] [--trec-eval PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from retbench.cli import BLAS_SPIN

#: the issue's goals, CPU seconds of the whole process
GOALS = {"retbench eval (1 line)": 0.3, "retbench --help": 0.15}

TYPER_APP = """
from pathlib import Path
from typing import Annotated
import typer
app = typer.Typer(add_completion=False, rich_markup_mode=None)
@app.command()
def score(qrels: Path, run: Path, metric: Annotated[list[str] | None, typer.Option("--metric")] = None) -> None:
    print(qrels, run, metric)
@app.command()
def other() -> None:
    pass
app()
"""


def cpu_seconds(cmd: list[str], env: dict[str, str]) -> float:
    """User + system CPU of one run of `cmd` (its whole process), from the kernel's accounting."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.strip()}")
    return usage.ru_utime + usage.ru_stime


def retbench_command() -> list[str]:
    """The console script beside this interpreter, as a person runs it; else the module."""
    script = Path(sys.executable).with_name("retbench")
    return [str(script)] if script.exists() else [sys.executable, "-m", "retbench.cli"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (median reported)")
    parser.add_argument("--trec-eval", default=shutil.which("trec_eval"), help="a trec_eval binary (optional)")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        qrels, run, app = Path(tmp, "qrels.txt"), Path(tmp, "run.txt"), Path(tmp, "typer_app.py")
        qrels.write_text("q1 0 d1 1\n")
        run.write_text("q1 Q0 d1 1 1.0 sys\n")
        app.write_text(TYPER_APP)
        py = sys.executable
        spin_env = {**env, BLAS_SPIN[0]: env.get(BLAS_SPIN[0], BLAS_SPIN[1])}
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([py, "-c", "pass"], env),
            "python -c 'import numpy'": ([py, "-c", "import numpy"], env),
            f"python -c 'import numpy', {'='.join(BLAS_SPIN)}": ([py, "-c", "import numpy"], spin_env),
            "python -c 'import typer'": ([py, "-c", "import typer"], env),
            "one-command Typer app": ([py, str(app), "score", str(qrels), str(run), "--metric", "ndcg@10"], env),
            "retbench --help": ([*retbench_command(), "--help"], env),
            "retbench eval (1 line)": ([*retbench_command(), "eval", str(qrels), str(run)], env),
        }
        if args.trec_eval:
            commands["trec_eval (1 line)"] = ([args.trec_eval, str(qrels), str(run)], env)
        load_before = os.getloadavg()
        for cmd, cmd_env in commands.values():  # warm-up: bytecode written, files in the page cache
            cpu_seconds(cmd, cmd_env)
        runs: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(max(1, args.repeat)):  # interleaved, so a burst of load spreads over every command
            for name, (cmd, cmd_env) in commands.items():
                runs[name].append(cpu_seconds(cmd, cmd_env))
        load_after = os.getloadavg()

    median = {name: statistics.median(times) for name, times in runs.items()}
    floors = {"python": median["python -c pass"], "numpy (CLI's)": median[list(commands)[2]]}
    floors["typer app"] = median["one-command Typer app"]
    print(f"Python {sys.version.split()[0]}; {args.repeat} runs each; CPU = user + sys of the whole process")
    print("load average (1, 5, 15 min): before " + " ".join(f"{x:.2f}" for x in load_before), end="")
    print(", after " + " ".join(f"{x:.2f}" for x in load_after))
    print()
    print("| command | CPU s (median) | min | " + " | ".join(f"x {f}" for f in floors) + " |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, value in median.items():
        ratios = " | ".join(f"{value / floors[f]:.1f}x" if floors[f] > 0 else "-" for f in floors)
        print(f"| {name} | {value:.3f} | {min(runs[name]):.3f} | {ratios} |")
    print()
    for name, goal in GOALS.items():
        verdict = "met" if median[name] <= goal else "not met"
        print(f"goal {name}: <= {goal:.2f} CPU s: {median[name]:.3f} ({verdict})")


if __name__ == "__main__":
    main()
