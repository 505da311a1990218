"""Statistics on per-query values: paired significance tests and intervals (`stats.paired`) and
prediction-powered inference (`stats.ppi`).

`retbench.stats.<name>` is the documented public spelling (docs/howto/how-sure.md, docs/howto/python-api.md), so
every public name of both modules is importable from here; code inside retbench imports each from its module.
"""

from retbench.stats.paired import (
    MAX_RESAMPLES,
    TestResult,
    bootstrap_ci,
    bootstrap_cis,
    bootstrap_means,
    check_alpha,
    check_resamples,
    check_seed,
    column_means,
    effect_size,
    holm,
    paired_ttest,
    randomization_test,
    randomization_tests,
    wilcoxon_signed_rank,
    z_quantile,
)
from retbench.stats.ppi import (
    PPIEstimate,
    classical_mean_ci,
    ppi_estimate,
    ppi_lambda,
    ppi_mean,
    ppi_mean_diff,
)

__all__ = [
    "MAX_RESAMPLES",
    "PPIEstimate",
    "TestResult",
    "bootstrap_ci",
    "bootstrap_cis",
    "bootstrap_means",
    "check_alpha",
    "check_resamples",
    "check_seed",
    "classical_mean_ci",
    "column_means",
    "effect_size",
    "holm",
    "paired_ttest",
    "ppi_estimate",
    "ppi_lambda",
    "ppi_mean",
    "ppi_mean_diff",
    "randomization_test",
    "randomization_tests",
    "wilcoxon_signed_rank",
    "z_quantile",
]
