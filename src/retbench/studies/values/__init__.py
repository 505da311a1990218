"""The document-values study (`retbench values`): what every document of a corpus earns for its queries."""

from retbench.studies.values.study import ValuesOutcome, load_values_config, run_values

__all__ = ["ValuesOutcome", "load_values_config", "run_values"]
