"""`benchmarks/label_simulation.py --tiny` runs end to end on both settings (SciFact and the shipped chunking set)
and its summary holds what RESULTS.md quotes: every cell of setting × judge × sampler × budget, coverages as
shares of the repetitions, and more human pairs at larger budgets."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from repo_paths import ROOT


def test_the_tiny_label_simulation_covers_both_settings_every_judge_and_both_samplers(tmp_path):
    out = tmp_path / "sim.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "label_simulation.py"), "--tiny", "--output", str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    cells = {(c["setting"], c["judge"], c["sampler"], c["fraction"]) for c in data["summary"]}
    assert cells == {
        (s, j, m, f)
        for s in ("scifact", "chunking")
        for j in ("good", "mediocre", "useless")
        for m in ("active", "uniform")
        for f in (0.05, 0.2, 0.5)
    }
    for c in data["summary"]:
        assert c["reps"] == 10 and all(0.0 <= c[k] <= 1.0 for k in c if k.startswith("cover_"))
        assert c["half_width"] > 0 and c["half_width_population"] > 0
    for s in ("scifact", "chunking"):
        pairs = [
            c["human_pairs"]
            for c in data["summary"]
            if (c["setting"], c["judge"], c["sampler"]) == (s, "good", "active")
        ]
        assert pairs == sorted(pairs) and pairs[0] < pairs[-1]
    assert "## chunking: 100 queries" in proc.stdout and "(question, chunk) pairs" in proc.stdout
