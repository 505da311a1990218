"""What `retbench tune` prints: the folds' choices, the out-of-sample estimate, the optimism, the noise."""

from __future__ import annotations

from collections.abc import Sequence

from retbench.tuning import TuneResult


def _ci(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else ""


def tune_lines(result: TuneResult, labels: Sequence[str], metric: str, n_queries: int) -> list[str]:
    """Plain lines (the CLI prints them; tests read them): one per fold, then the estimates and the warning."""
    r = result
    aim = "" if r.higher_is_better else " (lower is better: each choice takes the lowest mean)"
    lines = [
        f"{len(r.folds)}-fold cross-validation over {n_queries} queries, {len(labels)} settings, on {metric}{aim}:"
    ]
    for f in r.folds:
        lines.append(
            f"  fold {f.index + 1}: {f.n_queries} queries held out; chose [{f.chosen}] {labels[f.chosen]} "
            f"(mean {f.train_mean:.4f} on the other folds, {f.test_mean:.4f} held out)"
        )
    lo, hi = r.out_of_sample_ci
    lines.append(
        f"out-of-sample {metric}: {r.out_of_sample:.4f} [{lo:.4f}, {hi:.4f}] (95% CI, bootstrap of the whole selection)"
    )
    gap = "in-sample best minus out-of-sample" if r.higher_is_better else "out-of-sample minus in-sample best"
    lines.append(
        f"in-sample best: [{r.in_sample_best}] {labels[r.in_sample_best]} at {r.in_sample_mean:.4f}; "
        f"optimism ({gap}) {round(r.optimism, 12) + 0.0:+.4f}"
    )
    lines.append(f"chosen: [{r.chosen}] {labels[r.chosen]} (chosen by {r.chosen_by_folds} of {len(r.folds)} folds)")
    if r.default is not None and r.delta_vs_default is not None:
        lines.append(
            f"vs the untuned default [{r.default}] ({r.default_mean:.4f} in-sample): out-of-sample "
            f"{r.delta_vs_default:+.4f} {_ci(r.delta_ci)}, p = {r.p_vs_default:.3g} (bootstrap of the whole selection)"
        )
        if r.within_noise:
            lines.append(
                "warning: the tuned setting's edge over the untuned default is inside the noise "
                "(its 95% CI holds 0): keep the default or label more queries"
            )
    return lines


__all__ = ["tune_lines"]
