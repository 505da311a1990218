"""BEIR's rule where users compare with BEIR: a retrieved document whose id equals its query's is dropped
by default in the pytrec_eval ("as BEIR") mode, as BEIR's `EvaluateRetrieval.evaluate` does
(`ignore_identical_ids=True`), and kept in the trec_eval mode, as trec_eval keeps it; the flags override
either way, and the count dropped reaches the report, the manifest and `retbench eval`'s output.

The data is shaped like ArguAna: every query is also a corpus document under the same id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app
from stored import flat

runner = CliRunner()
N = 6


def write_twins(root: Path) -> Path:
    """A BEIR folder whose queries are documents too (same id, same text), each with one relevant counter-argument."""
    (root / "qrels").mkdir(parents=True)
    docs, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for i in range(N):
        topic = f"topic{i} subject{i} matter{i}"
        docs += [{"_id": f"arg{i}", "text": f"{topic} the argument"}, {"_id": f"ctr{i}", "text": f"{topic} a reply"}]
        queries.append({"_id": f"arg{i}", "text": f"{topic} the argument"})
        qrels.append(f"arg{i}\tctr{i}\t1")
    docs += [{"_id": f"noise{i}", "text": f"unrelated filler {i}"} for i in range(10)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return root


def run_study(tmp_path: Path, out: str, evaluation: dict) -> Path:
    cfg = {
        "name": out,
        "output": str(tmp_path / out),
        "depth": 5,
        "metrics": ["mrr", "ndcg@5"],
        "datasets": [{"path": str(tmp_path / "twins")}],
        "systems": [{"name": "bm25", "adapter": "bm25s"}],
        "evaluation": evaluation,
    }
    path = tmp_path / f"{out}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["run", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    return tmp_path / out


def test_the_beir_mode_drops_identical_ids_by_default_and_the_trec_eval_mode_keeps_them_in_a_study(
    tmp_path: Path,
) -> None:
    write_twins(tmp_path / "twins")
    beir = run_study(tmp_path, "beir", {"mode": "pytrec_eval"})
    trec = run_study(tmp_path, "trec", {"mode": "trec_eval"})
    kept_in_beir = run_study(tmp_path, "kept", {"mode": "pytrec_eval", "ignore_identical_ids": False})
    scores = {d.name: flat(d)["bm25"] for d in (beir, trec, kept_in_beir)}
    # each query finds itself at rank 1 and its counter-argument at rank 2; BEIR drops the first
    assert scores["beir"]["mrr"] == pytest.approx(1.0)
    assert scores["trec"]["mrr"] == pytest.approx(0.5) and scores["kept"]["mrr"] == pytest.approx(0.5)
    assert scores["beir"]["coverage"]["identical_ids_dropped"] == N
    assert "identical_ids_dropped" not in scores["trec"]["coverage"]
    manifests = {
        d.name: json.loads((d / "manifest.json").read_text())["evaluation"] for d in (beir, trec, kept_in_beir)
    }
    assert [manifests[k]["ignore_identical_ids"] for k in ("beir", "trec", "kept")] == [True, False, False]
    assert f"identical query/doc ids ignored ({N} dropped)" in (beir / "report.md").read_text()
    assert f"identical query/doc ids ignored ({N} dropped)" in (beir / "report.html").read_text()
    assert "identical query/doc ids" not in (trec / "report.md").read_text()
    # the stored run is what the system returned: only the evaluation leaves the query's own id out
    assert (beir / "systems" / "bm25" / "run.trec").read_text().split()[:3] == ["arg0", "Q0", "arg0"]


def eval_json(qrels: Path, run: Path, *flags: str) -> dict:
    result = runner.invoke(
        app, ["eval", str(qrels), str(run), "-m", "mrr", "-m", "ndcg@10", "--format", "json", *flags]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_eval_drops_identical_ids_as_beir_in_pytrec_eval_mode_and_the_flags_override_either_mode(
    tmp_path: Path,
) -> None:
    qrels = write_twins(tmp_path / "twins") / "qrels" / "test.tsv"
    lines = []
    for i in range(N):
        ranked = [f"arg{i}", f"noise{i}", f"ctr{i}"] if i % 2 else [f"arg{i}", f"ctr{i}"]
        lines += [f"arg{i} Q0 {d} {r} {10 - r} t" for r, d in enumerate(ranked, start=1)]
    full, cleaned = tmp_path / "full.trec", tmp_path / "cleaned.trec"
    full.write_text("\n".join(lines) + "\n")
    # BEIR's rule applied by hand: drop a line whose document id is its query id
    cleaned.write_text("\n".join(x for x in lines if x.split()[0] != x.split()[2]) + "\n")

    def means(out: dict) -> dict:
        return {m: v["mean"] for m, v in out["metrics"].items()}

    as_cleaned, as_full = means(eval_json(qrels, cleaned)), means(eval_json(qrels, full))
    assert as_cleaned != as_full
    beir = eval_json(qrels, full, "--mode", "pytrec_eval")
    assert beir["ignore_identical_ids"] is True and beir["n_identical"] == N and means(beir) == as_cleaned
    trec = eval_json(qrels, full)
    assert trec["ignore_identical_ids"] is False and "n_identical" not in trec and means(trec) == as_full
    assert means(eval_json(qrels, full, "--mode", "pytrec_eval", "--keep-identical-ids")) == as_full
    assert means(eval_json(qrels, full, "--ignore-identical-ids")) == as_cleaned
    table = runner.invoke(app, ["eval", str(qrels), str(full), "-m", "mrr", "--mode", "pytrec_eval"])
    assert f"identical query/doc ids ignored, as BEIR does: {N} retrieved doc(s) dropped" in table.output
