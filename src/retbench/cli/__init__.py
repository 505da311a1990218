"""The `retbench` command: parse, call the library, render. No logic of its own.

Exit codes: 0 ok; 1 a gate failed; 2 usage or input error; 3 a backend failed.
Each module holds one family of commands; this file is the command table, in the order
`retbench --help` lists them. Heavy libraries are imported inside commands so `retbench --help`
starts fast: keep the top of every module here light.
"""

from __future__ import annotations

import sys
import traceback

import typer

from retbench.cli import (
    compare,
    datasets,
    diff,
    evaluate,
    judge,
    label,
    plan,
    run,
    schema,
    serve,
    services,
    studies,
    traces,
    tune,
)
from retbench.cli.app import app, console, datasets_app, export_app, fail, handles_errors, traces_app
from retbench.secrets import redact

app.command("run")(run.run_command)
app.command("stress")(studies.stress_command)
app.command("chunking")(studies.chunking_command)
app.command("tune")(tune.tune_command)
app.command("compare")(compare.compare_command)
app.command("diff")(diff.diff_command)
app.command("canary")(diff.canary_command)
app.command("gate")(compare.gate_command)
app.command("report")(compare.report_command)
app.command("plan")(plan.plan_command)
app.command("history")(run.history_command)
app.command("serve")(serve.serve_command)
app.command("ingest-impact")(studies.ingest_impact_command)
app.command("values")(studies.values_command)
app.command("eval")(evaluate.eval_command)
app.command("metrics")(evaluate.metrics_command)
app.command("judge-relevance")(judge.judge_relevance)
app.command("judge-calibrate")(judge.judge_calibrate)
app.command("synth")(judge.synth)
app.command("schema")(schema.schema_command)
datasets_app.command("list")(datasets.datasets_list)
datasets_app.command("info")(datasets.datasets_info)
export_app.command("mlflow")(run.export_mlflow_command)
traces_app.command("import")(traces.traces_import)
app.add_typer(services.services_app, name="services")
app.add_typer(label.label_app, name="label")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception:  # a bug: the traceback as Python prints it, exit 1, but redacted like every other output
        sys.stderr.write(redact(traceback.format_exc()))
        sys.exit(1)


__all__ = ["app", "console", "fail", "handles_errors", "main"]
