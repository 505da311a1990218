"""Datasets named by ir_datasets id (`irds:<id>`) read through ir_datasets' own API, offline.

Each test registers a small dataset with `ir_datasets.registry.register` over files it writes (TSV documents
and queries, TREC qrels), and writes the same data as a BEIR folder: whatever retbench computes from the
`irds:` id must equal what it computes from the folder. A dataset whose file would have to be downloaded
points at a loopback port that listens and never accepts, so any download attempt would be seen.
"""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml
from typer.testing import CliRunner

ir_datasets = pytest.importorskip("ir_datasets", reason="the irds extra (ir_datasets) is not installed")

from ir_datasets.datasets.base import Dataset as IrdsDataset  # noqa: E402
from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries  # noqa: E402
from ir_datasets.util import Download, LocalDownload, RequestsDownload  # noqa: E402

from retbench.cli import app  # noqa: E402
from retbench.errors import InputError  # noqa: E402
from retbench.io.beir import read_beir  # noqa: E402
from retbench.io.datasets import load_dataset  # noqa: E402
from stored import flat  # noqa: E402

runner = CliRunner()

DOCS = [
    ("d1", "Apples", "apples are red and sweet"),
    ("d2", "Bananas", "bananas are yellow and long"),
    ("d3", "Cherries", "cherries are small red fruit"),
    ("d4", "", "a text with no title about grapes"),
    ("d5", "Lemons", "lemons are yellow and sour"),
]
QUERIES = [("q1", "red fruit"), ("q2", "yellow fruit"), ("q3", "grapes")]
QRELS = [("q1", "d1", 2), ("q1", "d3", 1), ("q2", "d2", 1), ("q2", "d5", 1), ("q3", "d4", 1), ("q3", "d1", 0)]


class TitledDoc(NamedTuple):
    doc_id: str
    title: str
    text: str

    def default_text(self) -> str:
        return f"{self.title} {self.text}"


def write_files(root: Path) -> tuple[Path, Path, Path]:
    root.mkdir(parents=True, exist_ok=True)
    docs, queries, qrels = root / "docs.tsv", root / "queries.tsv", root / "qrels.txt"
    docs.write_text("".join(f"{i}\t{t}\t{x}\n" for i, t, x in DOCS), encoding="utf-8")
    queries.write_text("".join(f"{i}\t{t}\n" for i, t in QUERIES), encoding="utf-8")
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in QRELS), encoding="utf-8")
    return docs, queries, qrels


def write_beir_folder(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in DOCS)
    )
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in QUERIES))
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in QRELS)
    )
    return root


@pytest.fixture(autouse=True)
def _irds_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ir_datasets' home in the test's folder; a download that slipped through would fail in a second, not hang."""
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    monkeypatch.setenv("IR_DATASETS_DL_TIMEOUT", "1")
    monkeypatch.setenv("IR_DATASETS_DL_TRIES", "1")
    monkeypatch.delenv("RETBENCH_IRDS_DOWNLOAD", raising=False)


def register(docs: Download | LocalDownload, queries: Path, qrels: Path) -> str:
    """A fresh ir_datasets id (the registry refuses a name twice) for these files."""
    dataset_id = f"retbench-test/{uuid.uuid4().hex[:8]}/test"
    ir_datasets.registry.register(
        dataset_id,
        IrdsDataset(
            TsvDocs(docs, doc_cls=TitledDoc),
            TsvQueries(LocalDownload(queries)),
            TrecQrels(LocalDownload(qrels), {0: "not relevant", 1: "relevant", 2: "highly relevant"}),
        ),
    )
    return dataset_id


@pytest.fixture
def local_id(tmp_path: Path) -> str:
    docs, queries, qrels = write_files(tmp_path / "irds-files")
    return register(LocalDownload(docs), queries, qrels)


def test_an_irds_id_reads_the_same_corpus_queries_and_qrels_as_the_same_data_in_a_beir_folder(
    local_id: str, tmp_path: Path
) -> None:
    via_irds = load_dataset(f"irds:{local_id}")
    via_beir = read_beir(write_beir_folder(tmp_path / "beir"))
    assert via_irds.name == f"irds:{local_id}"
    assert list(via_irds.corpus.ids) == list(via_beir.corpus.ids)
    assert via_irds.corpus.fingerprint() == via_beir.corpus.fingerprint()  # titles stay titles: BEIR's join rule
    assert dict(via_irds.queries) == dict(via_beir.queries)
    assert via_irds.split("test").to_dict() == via_beir.split("test").to_dict()
    assert via_irds.split("test").fingerprint() == via_beir.split("test").fingerprint()


def test_a_config_naming_an_irds_id_runs_offline_and_its_manifest_names_the_id(local_id: str, tmp_path: Path) -> None:
    scores = {}
    for label, dataset in (("irds", {"irds": local_id}), ("beir", {"path": str(write_beir_folder(tmp_path / "b"))})):
        cfg = {
            "name": label,
            "output": str(tmp_path / label),
            "depth": 5,
            "metrics": ["ndcg@3", "recall@2"],
            "datasets": [dataset],
            "systems": [{"name": "bm25", "adapter": "bm25s"}],
        }
        path = tmp_path / f"{label}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        result = runner.invoke(app, ["run", str(path), "--quiet"])
        assert result.exit_code == 0, result.output
        scores[label] = flat(tmp_path / label)["bm25"]
        manifest = json.loads((tmp_path / label / "manifest.json").read_text())
        if label == "irds":
            entry = manifest["datasets"][0]
            assert entry["irds"] == local_id and entry["name"] == f"irds:{local_id}"
            assert entry["corpus_fingerprint"] and entry["qrels_fingerprint"] and entry["queries"] == 3
    assert scores["irds"]["ndcg@3"] == scores["beir"]["ndcg@3"]
    assert scores["irds"]["recall@2"] == scores["beir"]["recall@2"]


def test_eval_scores_a_run_against_an_irds_ids_qrels_exactly_as_against_the_qrels_file(
    local_id: str, tmp_path: Path
) -> None:
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 d3 1 3.0 s\nq1 Q0 d1 2 2.0 s\nq2 Q0 d5 1 1.0 s\nq3 Q0 d2 1 1.0 s\n")
    outs = {}
    for qrels in (f"irds:{local_id}", str(tmp_path / "irds-files" / "qrels.txt")):
        result = runner.invoke(app, ["eval", qrels, str(run), "-m", "ndcg@10", "-m", "map", "--format", "json"])
        assert result.exit_code == 0, result.output
        outs[qrels] = json.loads(result.stdout)["metrics"]
    a, b = outs.values()
    assert {m: v["mean"] for m, v in a.items()} == {m: v["mean"] for m, v in b.items()}


def test_datasets_info_describes_an_irds_id(local_id: str) -> None:
    result = runner.invoke(app, ["datasets", "info", f"irds:{local_id}", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert (info["documents"], info["queries"]) == (5, 3)
    assert info["splits"]["test"]["judgements"] == 6 and info["splits"]["test"]["grades"] == {"0": 1, "1": 4, "2": 1}


def listening_port() -> socket.socket:
    """A loopback socket that listens and never accepts: a connection attempt would wait in its backlog."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    s.setblocking(False)
    return s


def test_a_file_ir_datasets_would_download_is_one_line_naming_it_and_where_it_looks_and_nothing_connects(
    tmp_path: Path,
) -> None:
    _, queries, qrels = write_files(tmp_path / "irds-files")
    server = listening_port()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/docs.tsv"
        target = tmp_path / "irds-home" / "retbench-test" / "docs.tsv"
        dataset_id = register(Download([RequestsDownload(url)], cache_path=str(target)), queries, qrels)
        result = runner.invoke(app, ["datasets", "info", f"irds:{dataset_id}"])
        with pytest.raises(BlockingIOError):  # nobody connected: ir_datasets never tried the network
            server.accept()
    finally:
        server.close()
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in result.output
    assert url in err and str(target) in err and "IR_DATASETS_HOME" in err


def test_a_shipped_ir_datasets_id_not_on_disk_is_refused_with_its_download_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"scifact\.zip.*irds-home"):
        load_dataset("irds:beir/scifact/test")


def test_a_missing_local_file_an_unknown_id_and_an_id_without_qrels_are_each_one_clear_error(tmp_path: Path) -> None:
    _, queries, qrels = write_files(tmp_path / "irds-files")
    gone = register(LocalDownload(tmp_path / "nowhere" / "docs.tsv"), queries, qrels)
    with pytest.raises(InputError, match=r"needs the file .*nowhere/docs\.tsv, which is not there"):
        load_dataset(f"irds:{gone}")
    with pytest.raises(InputError, match="ir_datasets has no dataset 'no-such/dataset'"):
        load_dataset("irds:no-such/dataset")
    with pytest.raises(InputError, match=r"has no qrels.*irds:beir/scifact/test"):
        load_dataset("irds:beir/scifact")


def test_subtopic_qrels_keep_each_documents_best_grade_as_the_subtopic_reader_does_and_say_so(tmp_path: Path) -> None:
    from ir_datasets.formats import TrecSubQrels

    from retbench.io.subtopics import read_subtopic_qrels

    docs, queries, _ = write_files(tmp_path / "irds-files")
    sub = tmp_path / "sub-qrels.txt"  # d1 relevant to subtopic 1 and not to subtopic 2; d3 the other way round
    sub.write_text("q1 1 d1 1\nq1 2 d1 0\nq1 1 d3 0\nq1 2 d3 2\nq2 1 d2 1\nq3 1 d4 1\n", encoding="utf-8")
    dataset_id = f"retbench-test/{uuid.uuid4().hex[:8]}/test"
    ir_datasets.registry.register(
        dataset_id,
        IrdsDataset(
            TsvDocs(LocalDownload(docs), doc_cls=TitledDoc),
            TsvQueries(LocalDownload(queries)),
            TrecSubQrels(LocalDownload(sub), {0: "not relevant", 1: "relevant", 2: "highly relevant"}),
        ),
    )
    loaded = load_dataset(f"irds:{dataset_id}")
    plain = read_subtopic_qrels(sub)
    assert loaded.split("test").to_dict() == {q: dict(plain[q]) for q in plain}
    assert loaded.split("test").to_dict()["q1"] == {"d1": 1, "d3": 2}
    assert any("best grade over its subtopics" in p for p in loaded.problems)
