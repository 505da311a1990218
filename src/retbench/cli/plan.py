"""`retbench plan`: the drop each gate can detect with the labelled queries at hand, and the queries a target needs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retbench.cli.app import handles_errors, write

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation


@handles_errors
def plan_command(
    criteria: Annotated[Path, typer.Option(help="Ship criteria YAML whose gated metrics to plan for.")],
    baseline: Annotated[Path, typer.Option(help="Baseline: a results directory or a TREC run file.")],
    baseline_system: Annotated[
        str | None, typer.Option(help="System to plan from when the baseline holds several.")
    ] = None,
    candidate: Annotated[
        Path | None,
        typer.Option(help="A candidate (results directory or run file) whose per-query changes give the noise."),
    ] = None,
    candidate_system: Annotated[
        str | None, typer.Option(help="System to take when the candidate holds several.")
    ] = None,
    effect: Annotated[
        float | None,
        typer.Option(help="Target drop in metric units (0.03 = 3 pp); default: each gate's regression_max, else 0.03."),
    ] = None,
    power: Annotated[float, typer.Option(help="Power to plan for.")] = 0.8,
    qrels: Annotated[Path | None, typer.Option(help="Qrels for run files (TREC, or BEIR .tsv).")] = None,
    simulations: Annotated[
        int,
        typer.Option(
            help="Simulated data sets per power estimate, at most 10,000 (which put it within 0.005; more only cost "
            "time)."
        ),
    ] = 1000,
    flips: Annotated[
        int,
        typer.Option(
            help="Sign flips of the randomization test in each simulated data set, at most 2,000 (p resolved to "
            "5e-4, a hundredth of alpha 0.05)."
        ),
    ] = 500,
    seed: Annotated[int, typer.Option(help="Seed of the simulation (results are reproducible under it).")] = 0,
    llm_qrels: Annotated[
        Path | None,
        typer.Option(help="LLM qrels (TREC): score the baseline's run with them too, for PPI's human-label budget."),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the plan as JSON.")] = None,
) -> None:
    """Label budgets: per gated metric, the detectable drop and the labelled queries a target drop needs."""
    import json

    from retbench.criteria import load_criteria
    from retbench.inputs import load_systems
    from retbench.planning import plan_criteria
    from retbench.power import check_simulation
    from retbench.report.plan import render_plan
    from retbench.report.resolution import separation_line
    from retbench.resolution import first_two_separation

    check_simulation(simulations, flips)  # before any file is read
    crit = load_criteria(criteria)
    metrics = list(dict.fromkeys(g.metric for g in crit.gates))
    loaded_base = load_systems([baseline], qrels=qrels, metrics=metrics, check_metrics=False)
    base = loaded_base.one(baseline_system, "baseline")
    llm = _llm_scores(baseline, base, llm_qrels, metrics) if llm_qrels is not None else None
    cand = None
    if candidate is not None:
        loaded = load_systems([candidate], qrels=qrels, metrics=metrics, check_metrics=False)
        cand = loaded.one(candidate_system, "candidate")
    result = plan_criteria(
        crit, base, cand, effect=effect, power=power, n_sims=simulations, n_flips=flips, seed=seed, llm=llm
    )
    text = render_plan(result)
    first_two = separation_line(first_two_separation(loaded_base.evaluations, metrics[0], power)) if metrics else None
    text += f"\n\n{first_two}\n" if first_two else ""
    typer.echo(text)
    write(json_out, json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n")


def _llm_scores(baseline: Path, base: Evaluation, llm_qrels: Path, metrics: list[str]) -> Evaluation:
    """The baseline system's run scored with LLM labels, under the same evaluation settings as its human scores."""
    from retbench.evaluation import evaluate
    from retbench.io.trec import read_qrels, read_run
    from retbench.results import load_results

    run = load_results(baseline).run(base.system) if baseline.is_dir() else read_run(baseline, name=base.system)
    return evaluate(
        run,
        read_qrels(llm_qrels),
        metrics,
        relevance_level=base.relevance_level,
        no_relevant=base.no_relevant,
        default_k=base.default_k,
        system=base.system,
    )
