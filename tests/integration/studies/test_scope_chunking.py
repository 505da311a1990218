"""A scoped system in `retbench chunking`: the example keyword router picks a folder of the chunking set per question,
BM25 searches the chunks inside it, and scope_miss_rate equals a count made from the set's own files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from repo_paths import CONFIGS, CORPORA, EXAMPLES
from retbench.errors import ConfigError
from retbench.studies.chunking import parse_config, run_chunking
from stored import flat_system

SHIPPED = CORPORA / "chunking_eval"


@pytest.fixture
def router(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import scope_router

    return scope_router.route


def shipped_config(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """configs/scoped.yaml, written to a temporary output, with a model-free tokenizer (the test loads no model)."""
    raw = yaml.safe_load((CONFIGS / "scoped.yaml").read_text("utf-8"))
    return raw | {"output": str(tmp_path / "out"), "tokenizer": "regex"} | changes


def status_lines(out: Path, key: str) -> dict[str, dict]:
    path = out / "systems" / key / "status.jsonl"
    return {r["qid"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_the_shipped_scoped_config_reports_the_routers_misses_on_the_chunking_set(tmp_path: Path, router) -> None:
    folders = {
        r["id"]: r["rel_path"].split("/")[0]
        for r in map(json.loads, (SHIPPED / "metadata.jsonl").read_text().splitlines())
    }
    questions = [json.loads(line) for line in (SHIPPED / "questions.jsonl").read_text().splitlines()]
    # the count from the files: a question the router sends to a folder that is not its gold document's
    chosen = {q["id"]: router(q["question"], {}) for q in questions}
    misses = sum(
        c is not None and c["folder"] != folders[q["corpus_id"]]
        for q, c in zip(questions, chosen.values(), strict=True)
    )
    assert 0 < misses < len(questions)

    said: list[str] = []
    outcome = run_chunking(parse_config(shipped_config(tmp_path), str(CONFIGS / "scoped.yaml")), log=said.append)
    assert any(line.startswith("recursive_200t+bm25: scope_miss_rate n/a,") for line in said)
    assert not any("nan" in line for line in said)  # a metric the unscoped system lacks is n/a, never nan
    routed = flat_system(outcome.result["recursive_200t+bm25_routed"])
    assert routed["scope_miss_rate"] == pytest.approx(misses / len(questions), abs=1e-12)
    assert flat_system(outcome.result["recursive_200t+bm25"])["scope_miss_rate"] is None  # not scoped: no value
    assert "scope" in routed["latency"]["stages"]
    status = status_lines(tmp_path / "out", "recursive_200t+bm25_routed")
    assert {q: s["scope"]["scope"] for q, s in status.items()} == chosen  # the router's choice, recorded per query
    run = (tmp_path / "out" / "systems" / "recursive_200t+bm25_routed" / "run.trec").read_text().splitlines()
    q, _, chunk, *_ = run[0].split()
    assert chunk.split("#")[0] in {d for d, f in folders.items() if f == chosen[q]["folder"]}  # searched inside


def write_small_set(root: Path) -> Path:
    """Two documents (speeches/, papers/) and three questions whose routing is known: right, wrong, a folder
    (chats/) that holds no document."""
    docs = {"sotu": "The president said the economy added jobs. ", "cells": "Gene expression in yeast cells. "}
    (root / "corpora").mkdir(parents=True)
    for d, text in docs.items():
        (root / "corpora" / f"{d}.md").write_text(text * 3)
    meta = [{"id": "sotu", "rel_path": "speeches/sotu.md"}, {"id": "cells", "rel_path": "papers/cells.md"}]
    (root / "metadata.jsonl").write_text("".join(json.dumps(m) + "\n" for m in meta))
    questions = [
        ("r1", "What did the president say about jobs?", "sotu", 4, 30),  # speeches: inside
        (
            "r2",
            "Which gene did the president mention?",
            "cells",
            0,
            15,
        ),  # papers 1 vs speeches 1: a tie, no scope: inside
        ("r3", "Which cells did the study of gene expression use?", "sotu", 0, 13),  # papers, gold in speeches: miss
        ("r4", "What does social media do to yeast?", "cells", 15, 30),  # chats: no document there: miss, fallback
    ]
    with open(root / "questions.jsonl", "w") as fh:
        for qid, text, doc, start, end in questions:
            content = (docs[doc] * 3)[start:end]
            ref = {"content": content, "start_index": start, "end_index": end}
            fh.write(json.dumps({"id": qid, "question": text, "corpus_id": doc, "references": [ref]}) + "\n")
    return root


def test_a_small_set_counts_misses_by_hand_and_records_the_fallback(tmp_path: Path, router) -> None:
    data = write_small_set(tmp_path / "small")
    chosen = {q: router(t, {}) for q, t in (("r2", "Which gene did the president mention?"),)}
    assert chosen["r2"] is None  # the tie the hand count below relies on
    cfg = shipped_config(
        tmp_path, dataset=str(data), depth=2, budgets=[64], token_k=[1], metrics=["scope_miss_rate", "recall@2"]
    )
    cfg["chunkers"] = [{"name": "sentences", "kind": "sentences", "size": 1, "overlap": 0}]
    outcome = run_chunking(parse_config(cfg, "scoped.yaml"), log=lambda _: None)
    for mode in ("bm25_routed", "bm25_routed_fallback"):
        assert flat_system(outcome.result[f"sentences+{mode}"])["scope_miss_rate"] == 2 / 4  # r3 and r4
    plain = status_lines(tmp_path / "out", "sentences+bm25_routed")["r4"]
    assert (plain["scope"]["scope"], plain["scope"]["scoped_n"], plain["status"]) == ({"folder": "chats"}, 0, "empty")
    again = status_lines(tmp_path / "out", "sentences+bm25_routed_fallback")["r4"]
    assert again["scope"]["fallback"] is True and again["status"] == "ok"  # searched again over everything


def test_a_scope_on_a_beir_dataset_in_a_chunking_study_is_refused_naming_the_field(tmp_path: Path) -> None:
    cfg = shipped_config(tmp_path, dataset={"name": "scifact", "split": "test"})
    for key in ("token_k", "budgets"):
        cfg.pop(key)
    with pytest.raises(ConfigError, match="needs a chunking set") as err:
        parse_config(cfg, "scoped.yaml")
    assert err.value.field == "systems[1].scope"


def summary_table(report: str) -> dict[str, dict[str, str]]:
    """The all-chunks table of a chunking report.md: system -> column -> cell."""
    section = report.split("## All retrieved chunks", 1)[1].split("\n## ", 1)[0]
    lines = [x for x in section.splitlines() if x.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in x.strip("|").split("|")] for x in lines[2:]]
    return {r[1]: dict(zip(head, r, strict=True)) for r in rows}


def test_a_chunking_study_ranks_on_a_metric_of_the_systems_not_on_a_scope_diagnostic_listed_first(
    tmp_path: Path, router
) -> None:
    data = write_small_set(tmp_path / "small")
    cfg = shipped_config(
        tmp_path, dataset=str(data), depth=2, budgets=[64], token_k=[1], metrics=["scope_miss_rate", "recall@2"]
    )
    cfg["chunkers"] = [{"name": "sentences", "kind": "sentences", "size": 1, "overlap": 0}]
    run_chunking(parse_config(cfg, "scoped.yaml"), log=lambda _: None)
    table = summary_table((tmp_path / "out" / "report.md").read_text())
    assert "recall@2 rank 95%" in table["bm25"] and "scope_miss_rate rank 95%" not in table["bm25"]
    assert all(row["recall@2 rank 95%"] != "not ranked" for row in table.values())  # every system has recall


def test_systems_without_the_declared_primary_metric_are_shown_as_not_ranked(tmp_path: Path, router) -> None:
    data = write_small_set(tmp_path / "small")
    cfg = shipped_config(
        tmp_path,
        dataset=str(data),
        depth=2,
        budgets=[64],
        token_k=[1],
        metrics=["recall@2", "scope_miss_rate"],
        primary="scope_miss_rate",
    )
    cfg["chunkers"] = [{"name": "sentences", "kind": "sentences", "size": 1, "overlap": 0}]
    routed = next(s for s in cfg["systems"] if s["name"] == "bm25_routed")
    cfg["systems"].append(routed | {"name": "bm25_routed_again"})
    run_chunking(parse_config(cfg, "scoped.yaml"), log=lambda _: None)
    report = (tmp_path / "out" / "report.md").read_text()
    table = summary_table(report)
    assert table["bm25"]["scope_miss_rate rank 95%"] == "not ranked"  # no scope stage: no value to rank
    assert table["bm25_routed"]["scope_miss_rate rank 95%"].startswith("1")  # equal misses share rank 1
    assert "Not ranked (no value of the ranking metric): sentences+bm25." in report


def test_a_primary_metric_the_study_does_not_compute_is_refused_naming_the_field(tmp_path: Path) -> None:
    cfg = shipped_config(tmp_path, primary="ndcg@10")
    with pytest.raises(ConfigError, match="not one of the study's metrics") as err:
        parse_config(cfg, "scoped.yaml")
    assert err.value.field == "primary"


def test_a_chunking_study_shows_the_intervals_and_the_breakdown_metrics_json_holds(tmp_path: Path, router) -> None:
    import io

    from rich.console import Console

    from retbench.report.terminal import render_chunking
    from retbench.results import read_results

    data = write_small_set(tmp_path / "small")
    cfg = shipped_config(tmp_path, dataset=str(data), depth=2, budgets=[64], token_k=[1], metrics=["recall@2", "mrr@2"])
    cfg["chunkers"] = [{"name": "sentences", "kind": "sentences", "size": 1, "overlap": 0}]
    parsed = parse_config(cfg, "scoped.yaml")
    outcome = run_chunking(parsed, log=lambda _: None)
    stored = read_results(tmp_path / "out")["sentences+bm25_routed"]
    mrr = stored.metrics["mrr@2"]
    shown = f"{mrr.value:.3f} [{mrr.ci_low:.3f}, {mrr.ci_high:.3f}]"
    group = stored.breakdown["doc_type:md"]  # every gold document of the set is a .md file
    assert group["n"] == 4
    report = (tmp_path / "out" / "report.md").read_text()
    assert summary_table(report)["bm25_routed"]["mrr@2"] == shown
    section = report.split("## Breakdown by group", 1)[1].split("\n## ", 1)[0]
    assert "### sentences+bm25_routed" in section
    assert f"| doc_type:md | 4 | {group['means']['recall@2']:.4f} | {group['means']['mrr@2']:.4f} |" in section
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Breakdown by group" in html and "doc_type:md" in html and shown in html
    out = io.StringIO()
    Console(file=out, width=250).print(render_chunking(parsed, outcome.result))
    printed = out.getvalue()
    assert shown in printed and "breakdown by group: sentences+bm25_routed" in printed and "doc_type:md" in printed
