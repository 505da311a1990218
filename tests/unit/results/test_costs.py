"""Cost per 1,000 queries and of indexing from measured figures and stated prices; missing is never zero."""

from __future__ import annotations

import pytest

from retbench.config import validate
from retbench.config.costs import CostsBlock
from retbench.config.experiment import ExperimentModel
from retbench.errors import ConfigError
from retbench.results.costs import system_costs

RESOURCES = {"devices": ["cpu"], "encode_seconds": 0.0, "index_seconds": 2.0, "search_seconds": 0.3, "index_bytes": 5e8}
CPU = {"price": 0.00002, "source": "an example machine price", "example": True}


def costs(**prices) -> CostsBlock:
    return validate(CostsBlock, prices, "costs.yaml")


def test_every_measured_item_priced_gives_totals_with_each_figures_source():
    c = system_costs(
        costs(cpu_second=CPU, index_gb_month={"price": 0.08, "source": "a disk price"}), "bm25", RESOURCES, {}, 300
    )
    per = c["per_1k_queries"]
    assert per["total"] == pytest.approx(0.3 / 300 * 1000 * 0.00002)
    assert per["items"][0]["source"] == "an example machine price" and per["missing"] == []
    assert c["indexing"]["total"] == pytest.approx(2.0 * 0.00002)
    assert c["index_per_month"]["total"] == pytest.approx(0.5 * 0.08)
    assert c["examples"] is True


def test_a_measured_item_without_a_price_is_missing_and_the_total_is_not_zero():
    c = system_costs(
        costs(cpu_second=CPU),
        "rag",
        RESOURCES,
        {"generate": {"calls": 300, "input_tokens": 150000, "output_tokens": 0}},
        300,
    )
    per = c["per_1k_queries"]
    assert per["total"] is None
    assert [m["unit"] for m in per["missing"]] == ["per_call", "per_1k_input_tokens"]
    assert c["index_per_month"]["total"] is None  # the index was measured, its storage is unpriced


def test_a_system_on_a_gpu_is_priced_per_gpu_second_and_its_own_prices_win():
    block = costs(cpu_second=CPU, systems={"dense": {"gpu_second": {"price": 0.001, "source": "a GPU price"}}})
    c = system_costs(block, "dense", {**RESOURCES, "devices": ["cuda:0"]}, None, 300)
    assert c["per_1k_queries"]["items"][0]["unit"] == "gpu_second"
    assert c["per_1k_queries"]["total"] == pytest.approx(1.0 * 0.001)
    other = system_costs(block, "bm25", {**RESOURCES, "devices": ["cuda:0"]}, None, 300)
    assert other["per_1k_queries"]["total"] is None


def test_unmeasured_figures_are_said_not_priced():
    c = system_costs(costs(cpu_second=CPU), "x", {}, None, 300)
    assert c["per_1k_queries"]["not_measured"] == ["search machine seconds"]
    assert c["per_1k_queries"]["total"] is None and c["per_1k_queries"]["items"] == []


def test_a_price_without_a_source_and_prices_for_unknown_systems_are_refused_naming_the_field():
    with pytest.raises(ConfigError, match="source"):
        costs(cpu_second={"price": 0.1})
    raw = {
        "datasets": ["scifact"],
        "systems": [{"name": "bm25", "adapter": "bm25s"}],
        "costs": {"systems": {"bm52": {"cpu_second": CPU}}},
    }
    with pytest.raises(ConfigError, match=r"costs\.systems\.bm52.*no system is named 'bm52'"):
        validate(ExperimentModel, raw, "exp.yaml")


def test_a_systems_query_cost_is_the_same_whether_its_queries_were_in_the_cache_or_not():
    # dense run first: the warm-up encoded all 300 queries (6 s); run second: every vector was cached (0.05 s)
    warmups = [(6.0, 300), (0.05, 0)]
    per_1k = []
    for seconds, encoded in warmups:
        warmup = {"encoded": encoded, "of": 300, "seconds": seconds, "encode_seconds_per_query": 0.02}
        res = {**RESOURCES, "search_seconds": 0.3 + seconds, "search_on": {"query_warmup": warmup}}
        per = system_costs(costs(cpu_second=CPU), "dense", res, None, 300)["per_1k_queries"]
        assert [i["item"] for i in per["items"]] == ["search machine seconds", "query encoding machine seconds"]
        assert per["items"][0]["quantity"] == pytest.approx(1.0)  # 0.3 s of timed search over 300 queries
        assert per["items"][1]["quantity"] == pytest.approx(20.0)  # 0.02 s a query
        per_1k.append(per["total"])
    assert per_1k[0] == pytest.approx(per_1k[1]) == pytest.approx(21.0 * 0.00002)


def test_a_hosted_embedding_apis_query_encoding_is_not_measured_so_the_total_is_unknown():
    warmup = {"encoded": 300, "of": 300, "seconds": 4.0, "encode_seconds_per_query": None}
    res = {**RESOURCES, "search_seconds": 4.3, "search_on": {"query_warmup": warmup}}
    per = system_costs(costs(cpu_second=CPU), "api", res, None, 300)["per_1k_queries"]
    assert per["not_measured"] == ["query encoding machine seconds"] and per["total"] is None


def test_document_vectors_from_the_embedding_cache_leave_the_indexing_cost_unknown():
    cold = {**RESOURCES, "encode_seconds": 90.0, "encode_on": {"encoded": 5183, "of": 5183}}
    warm = {**RESOURCES, "encode_seconds": 0.03, "encode_on": {"encoded": 0, "of": 5183}}
    measured = system_costs(costs(cpu_second=CPU), "dense", cold, None, 300)["indexing"]
    assert measured["total"] == pytest.approx(92.0 * 0.00002) and measured["not_measured"] == []
    cached = system_costs(costs(cpu_second=CPU), "dense", warm, None, 300)["indexing"]
    assert cached["total"] is None
    assert cached["not_measured"] == ["document encoding (5,183 vectors from the embedding cache)"]
