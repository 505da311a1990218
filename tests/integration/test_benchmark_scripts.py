"""Every script under benchmarks/ runs end to end at a tiny size, so a script nothing runs cannot rot unseen.

Each script is run as a person runs it (`python benchmarks/NAME.py ...`, from a scratch folder, with an embedding
cache of its own shared by this module) with the arguments below: the smallest slice each script takes (most
took one already; faiss_ann, ingest_speed and retriever_quality gained `--docs`/`--queries`, ray_encode_cpu
`--parts`). Each smoke is a few seconds to about 20 s of CPU; what they print is not checked beyond the exit
status and a line each script always prints: the figures belong to benchmarks/RESULTS.md, never to assertions.

The two judge scripts are pointed at a loopback OpenAI-compatible server that answers every call with
`{"grade": 2}` at once (both take a server address: `--base-url`, or the judge block of a calibration config):
the 0.5B local model needs over a minute per call on two cores, and the model itself is exercised by
tests/integration/llm. stores.py runs its in-process systems and Chroma's server (`--chroma-server`), the path
whose system copy once crashed; the other servers (PostgreSQL, Milvus, Typesense) have their own tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from http_support import send_json, serving_in_thread
from repo_paths import ROOT

pytestmark = pytest.mark.slow
BENCHMARKS = ROOT / "benchmarks"

#: script -> (arguments at a tiny size, a piece of text its output always has)
SMOKE: dict[str, tuple[str, str]] = {
    "bm25_speed": ("--repeat 1", "bm25"),
    "compare_speed": ("--systems 2 --metrics 2 --queries 20", '"resamples"'),
    "dense_speed": ("--docs 64 --block 32", "cold/raw throughput"),
    "document_values": ("--docs 2000 --queries 50 --dim 16", "efficiency check"),
    "diff_scale": ("--tiny --resamples 200", "changed top 10"),
    "faiss_ann": ("--repeat 1 --no-pq --docs 300 --queries 30", "flat_ip (exact)"),
    "gpu_throughput": (
        "--device cpu --limit 16 --encode-batches 16 --rerank-batches 16 --dtypes fp32 --queries 2 --depth 4 --repeat 1",
        "pairs/s",
    ),
    "harness_overhead": ("--requests 200 --repeats 1 --sleep-requests 100", "retbench"),
    "ingest_speed": ("--candidates 5 --bm25-candidates 2 --repeat 1 --docs 400", "same results as add+re-run: True"),
    "judge": ("--pairs 2 --max-chars 100 --base-url {llm}", "statuses {'ok': 4}"),
    "load_speed": ("--repeat 1", "retbench"),
    "metrics_speed": ("--sizes 100x10 --repeats 1 --tools retbench,pytrec_eval", "means"),
    "ppi_real_judge": ("--judge {judge_config} --queries 4 --k 1 --human 2 --splits 20 --output {tmp}/ppi", "PPI"),
    "profile_speed": ("metrics --sizes 100x10", "seconds per stage"),
    "ray_encode_cpu": ("--docs 8 --parts 1", "load average at end"),
    "rerank_speed": ("--model {cross_encoder} --queries 4 --depth 5 --block 2", "pairs"),
    "repeat_eval_speed": ("--sizes 100x10 --repeats 1", "ranx / retbench"),
    "retriever_quality": ("--queries 10 --docs 200", "hybrid rrf"),
    "run_columns_speed": ("--sizes 100x10 --repeats 1", "means agree with retbench from text"),
    "sequential_simulation": ("--tiny --streams 5", "n80_over_n_fixed"),
    "startup": ("--repeat 1", "goal retbench eval (1 line)"),
    "scale_bm25": ("--docs 2000 --queries 50 --data {tmp}/scale-bm25", "retbench"),
    "scale_encode": ("--docs 16 --repeat 1 --paths raw,in-process", "in process"),
    "stores": ("--only faiss-flat chroma --chroma-server --queries 5 --docs 50 --latency-queries 2", "| chroma-http |"),
    "train_cross_encoder": ("--queries 4 --negatives 1 --epochs 1 --output {tmp}/ce", "saved to"),
}


#: scripts whose smoke run lives beside the study they measure; modules the scripts import are not scripts
ELSEWHERE = {"label_simulation": "tests/integration/studies/test_label_simulation.py"}


def test_every_benchmark_script_has_a_smoke_run():
    scripts = {p.stem for p in BENCHMARKS.glob("*.py") if "__main__" in p.read_text(encoding="utf-8")}
    for name, test in ELSEWHERE.items():
        assert name in (ROOT / test).read_text(encoding="utf-8"), f"{test} no longer runs {name}"
    scripts -= set(ELSEWHERE)
    assert scripts == set(SMOKE), f"missing smoke runs: {scripts - set(SMOKE)}; stale: {set(SMOKE) - scripts}"


class _Grader(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat server that grades every pair 2 at once."""

    def do_GET(self):  # /v1/models
        send_json(self, {"object": "list", "data": [{"id": "grader", "object": "model"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        message = {"role": "assistant", "content": '{"grade": 2}'}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        send_json(self, {"id": "x", "object": "chat.completion", "model": "grader", "choices": [choice]})

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> dict[str, str]:
    """Folders and servers the scripts' arguments name; one embedding cache for the whole module."""
    root = tmp_path_factory.mktemp("bench")
    with serving_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Grader)) as server:
        llm = f"http://127.0.0.1:{server.server_port}/v1"
        config = root / "judge.yaml"
        judge = {"base_url": llm, "model": "grader", "max_tokens": 8, "timeout": 60, "retries": 0}
        config.write_text(
            json.dumps(
                {
                    "name": "smoke",
                    "dataset": "scifact",
                    "split": "test",
                    "output": str(root / "calibration"),
                    "judge": {**judge, "prompt": "relevance_v1"},
                    "sample": {"relevant": 1, "nonrelevant": 1, "nonrelevant_depth": 2, "seed": 0},
                    "relevant_from": 2,
                    "max_chars": 150,
                }
            )
        )
        yield {"llm": llm, "judge_config": str(config), "root": str(root), "cross_encoder": str(root / "ce")}


def _run(name: str, scratch: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    args, _ = SMOKE[name]
    words = [a.format(tmp=tmp, **scratch) for a in args.split()]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "RAY_USAGE_STATS_ENABLED": "0"}
    env["RETBENCH_CACHE"] = str(Path(scratch["root"]) / "cache")
    env["RETBENCH_HISTORY"] = str(tmp / "history.sqlite")
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), *words],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def cross_encoder(scratch) -> Path:
    """The train_cross_encoder smoke run (its `--output {tmp}/ce` in the module's folder): the tiny cross-encoder
    rerank_speed then times."""
    done = _run("train_cross_encoder", scratch, Path(scratch["root"]))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert SMOKE["train_cross_encoder"][1] in done.stdout + done.stderr
    return Path(scratch["cross_encoder"])


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_the_benchmark_script_runs_at_a_tiny_size(name, scratch, cross_encoder, tmp_path):
    if name == "train_cross_encoder":
        assert (cross_encoder / "config.json").is_file()  # its smoke run is the fixture's
        return
    done = _run(name, scratch, tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{name}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert SMOKE[name][1] in out, f"{name}: {SMOKE[name][1]!r} not in\n{out[-3000:]}"
    assert "Traceback" not in done.stderr
