"""What a metric may declare beyond `name`, `cutoff` and `compute` is one typed row (`metrics.base.MetricRow`) with
its defaults: a plugin that declares nothing gets them, one that declares a value of the wrong kind is refused when
it registers (naming the field), the declarations a plugin writes as lists are read as the built-ins' are, and the
plugin page and the generated reference list every field."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Any

import numpy as np
import pytest

import repo_paths
from retbench.errors import ConfigError
from retbench.metrics import catalog, registry
from retbench.metrics.base import MetricContext, MetricRow, row_of
from retbench.metrics.primary import default_primary
from retbench.report import fmt


class Plugin:
    """A plugin metric: the protocol's three members, plus whatever a test sets on it."""

    cutoff = "none"

    def __init__(self, name: str, **declared: Any) -> None:
        self.name = name
        for key, value in declared.items():
            setattr(self, key, value)

    def compute(self, ctx: MetricContext, k: np.ndarray | None, params: Mapping[str, float]) -> np.ndarray:
        return np.full(len(ctx.gm), 0.25)


@pytest.fixture
def registered() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        catalog.unregister(name)


def test_a_plugin_that_declares_only_the_protocol_gets_the_row_defaults(registered):
    registered.append(catalog.register(Plugin("plain_plugin")).name)
    assert row_of(registry.parse_metric("plain_plugin").metric) == MetricRow()
    assert not registry.lower_is_better("plain_plugin") and registry.value_range("plain_plugin") is None
    assert registry.unanswered_value_of("plain_plugin") == 0.0
    [row] = [r for r in catalog.catalog() if r["name"] == "plain_plugin"]
    assert (row["unit"], row["aggregate"], row["label"], row["parameters"]) == (
        "score",
        "mean",
        "plain_plugin",
        {"rel": 1},
    )


def test_declarations_written_as_lists_are_read_as_the_builtins_are_everywhere(registered):
    declared = Plugin(
        "error_share",
        unit="share",
        lower_is_better=True,
        value_range=[0, 2],  # a list, as YAML-minded authors write it
        aliases=["errshare"],
        label="error share",
        params={"alpha": 0.5},
        param_ranges={"alpha": [0, 1]},
    )
    registered.append(catalog.register(declared).name)
    assert registry.parse_metric("ERRSHARE").name == "error_share"  # the alias, case-insensitive
    assert registry.lower_is_better("error_share") and registry.value_range("error_share") == (0.0, 2.0)
    assert registry.unanswered_value_of("error_share") == 2.0  # missing is not good: the top of its range
    assert fmt.value("error_share", 0.25) == "25.0%" and fmt.metric_label("error_share") == "error share"
    with pytest.raises(ConfigError, match="alpha must be in"):
        registry.parse_metric("error_share(alpha=2)")


def test_a_plugin_that_keeps_unanswered_values_is_not_ranked_on(registered):
    registered.append(catalog.register(Plugin("judged_count", keeps_unanswered=True, aggregate="sum")).name)
    assert registry.unanswered_value_of("judged_count") is None
    assert registry.parse_metric("judged_count").aggregate == "sum"
    assert default_primary(["judged_count", "ndcg@10"]) == "ndcg@10"


@pytest.mark.parametrize(
    ("declared", "field"),
    [
        ({"unit": "percent"}, "unit"),
        ({"aggregate": "median"}, "aggregate"),
        ({"value_range": (1.0, 0.0)}, "value_range"),
        ({"value_range": 5}, "value_range"),
        ({"trec_defaults": ["ten"]}, "trec_defaults"),
    ],
)
def test_a_declaration_of_the_wrong_kind_is_refused_when_the_plugin_registers_naming_the_field(declared, field):
    with pytest.raises(ConfigError) as err:
        catalog.register(Plugin("bad_plugin", **declared))
    assert err.value.field == field and "bad_plugin" in str(err.value)
    assert "bad_plugin" not in catalog.available()


def test_a_plugins_trec_name_is_called_with_its_parameters_or_with_k_alone_as_it_is_declared(registered):
    one = Plugin("my_cut", cutoff="k", trec_name=lambda k: f"my_cut_{k}")
    two = Plugin("my_two", cutoff="k", params={"beta": 1.0}, trec_name=lambda k, params: f"two_{k}_{params['beta']:g}")
    registered += [catalog.register(one).name, catalog.register(two).name]
    assert registry.parse_metric("my_cut@5").trec_name == "my_cut_5"
    assert registry.parse_metric("my_two@3(beta=2)").trec_name == "two_3_2"
    assert registry.parse_metric("my_cut@5(rel=2)").trec_name is None  # trec_eval has one level for every measure


def test_every_declaration_is_listed_on_the_plugin_page_and_in_the_generated_metrics_reference(monkeypatch):
    page = (repo_paths.ROOT / "docs" / "howto" / "plugins.md").read_text(encoding="utf-8")
    monkeypatch.syspath_prepend(str(repo_paths.ROOT / "scripts"))
    sys.modules.pop("docs_reference", None)
    import docs_reference

    reference = docs_reference.metrics_reference()
    for f in fields(MetricRow):
        assert f"`{f.name}`" in page, f.name
        assert f"| `{f.name}` |" in reference, f.name
