"""What the LLM judge costs: verdicts per second with a local model, and the harness's own overhead.

Starts tinyq4 on 127.0.0.1 (one thread) with a GGUF file, judges N SciFact (query, document) pairs
with the shipped relevance prompt, then judges them again (all cache hits). Reported:

- `calls/s`: verdicts per second from the model (uncached);
- `server s/call`: the client's measured latency per call (HTTP + model);
- `harness ms/call`: judge() wall time minus the calls' latency, per call (prompt filling, hashing,
  parsing, cache and call-log writes);
- `cached ms/verdict`: a re-run's time per verdict (no call): the floor of the harness.

    .venv/bin/python benchmarks/judge.py [--model .retbench-cache/models/...gguf] [--pairs 4] [--max-chars 400]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from retbench.io.datasets import load_dataset
from retbench.llm.judge import Judge
from retbench.llm.local import local_server
from retbench.llm.settings import JudgeSettings
from retbench.studies.labels.relevance import judge_items


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=".retbench-cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--max-chars", type=int, default=400)
    ap.add_argument("--base-url", help="judge through this running server instead of starting tinyq4 on --model")
    args = ap.parse_args()
    ds = load_dataset("scifact", ["test"])
    qrels = ds.split("test")
    pairs = [(q, d) for q in list(qrels)[: args.pairs] for d in list(qrels[q])[:1]]
    items = judge_items(pairs, ds.queries, ds.corpus, args.max_chars)
    settings = JudgeSettings.from_config(
        {
            "base_url": "http://127.0.0.1:1",
            "model_file": None if args.base_url else args.model,
            "max_tokens": 8,
            "timeout": 1800,
            "retries": 0,
        }
    )
    server = nullcontext(args.base_url) if args.base_url else local_server(args.model, threads=1)
    with tempfile.TemporaryDirectory() as tmp, server as url:
        judge = Judge(settings, base_url=url, cache_dir=Path(tmp), log_path=Path(tmp) / "calls.jsonl")
        judge.identity  # noqa: B018 - ask the server once before timing
        t0 = time.perf_counter()
        verdicts = judge.judge(items)
        wall = time.perf_counter() - t0
        calls = judge.stats.calls
        t1 = time.perf_counter()
        judge.judge(items)
        cached = time.perf_counter() - t1
    print(f"model {judge.identity.model}, {calls} calls, statuses {dict(judge.stats.statuses)}")
    print(f"calls/s {calls / wall:.4f}; server s/call {judge.stats.seconds / calls:.2f}")
    print(
        f"harness ms/call {(wall - judge.stats.seconds) / calls * 1000:.2f}; cached ms/verdict {cached / len(items) * 1000:.3f}"
    )
    print("first grades:", [v.value for v in verdicts][:20])


if __name__ == "__main__":
    main()
