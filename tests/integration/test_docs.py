"""The documentation site builds, and its examples cannot drift from the code.

- `mkdocs build --strict` passes (every nav page exists, every internal link resolves, and the reference
  pages generated from the Typer app, the config models and the metric registry render);
- every `retbench` command line in a shell example names a real command and only options that command
  declares (checked against the Typer app, so a renamed option fails here);
- every Python example runs in a fresh interpreter from a scratch folder holding the shipped corpora and
  configs (an example whose first line says `# a template` is only compiled: it names code the reader writes);
- the main shell flows of the docs run end to end on the shipped quick config (each line is taken from the
  docs text, so the docs and this test name the same command).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from label_page import WALK
from local_model import local_model_file

ROOT = Path(__file__).resolve().parents[1]
while not (ROOT / "mkdocs.yml").is_file() and ROOT.parent != ROOT:
    ROOT = ROOT.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)

pytestmark = pytest.mark.slow


def _fences(lang: str) -> list[tuple[Path, str]]:
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        out += [(page, body) for kind, body in FENCE.findall(page.read_text(encoding="utf-8")) if kind == lang]
    return out


def _command_lines(body: str) -> list[str]:
    """Shell lines with continuations joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    lines = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            lines.extend(part.strip() for part in re.split(r"&&|\|\|", line))
    return lines


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built by `mkdocs build --strict` (its hook adds the generated reference pages)."""
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_site_builds_with_strict_checks(site):
    assert (site / "reference" / "cli" / "index.html").is_file()
    metrics_page = (site / "reference" / "metrics" / "index.html").read_text(encoding="utf-8")
    assert "ndcg_cut_" in metrics_page and "recip_rank" in metrics_page


def test_only_pages_are_published_never_the_build_scripts(site):
    assert not [p for p in site.rglob("*.py")]
    assert not (site / "hooks.py").exists() and not list(site.rglob("docs_reference*"))


def test_the_reference_generator_runs_before_any_builder_and_writes_the_same_pages(tmp_path):
    """`python scripts/docs_reference.py DIR` is the step a builder without MkDocs hooks (Zensical) runs first."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_reference.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("cli", "metrics", "config"):
        page = tmp_path / "reference" / f"{name}.md"
        assert page.is_file() and page.read_text(encoding="utf-8").count("\n") > 20


def test_the_metric_reference_groups_every_registry_row_by_family_ranking_first(site):
    from retbench.metrics.catalog import catalog

    html = (site / "reference" / "metrics" / "index.html").read_text(encoding="utf-8")
    heads = re.findall(r"<h2 id=\"([^\"]+)\"", html)
    assert heads[:6] == [
        "ranking", "trec_evals-other-measures", "incomplete-judgements", "ir_measures-families", "llm-judged", "answers"
    ]  # fmt: skip
    sections = dict(zip(heads, re.split(r"<h2 id=\"[^\"]+\"", html)[1:], strict=True))
    for row in catalog():
        shown = [
            h for h, body in sections.items() if re.search(rf"<td><code>{re.escape(row['name'])}(@k)?</code>", body)
        ]
        assert len(shown) == 1, (row["name"], shown)
    first = re.findall(r"<td><code>([^<]+)</code>", sections["ranking"])
    assert {"ndcg", "recall@k", "map", "mrr"} <= set(first)
    assert "bpref" in sections["incomplete-judgements"] and "faithfulness" in sections["llm-judged"]
    assert "P_&lt;k&gt;" in sections["ranking"]
    # every row's meaning has its {k} filled in; only the plugin authors' table spells the template out
    assert [h for h, body in sections.items() if "{k}" in body] == ["declaring-a-metric"]


# a resource a page loads (stylesheet, script, image, font, preconnect), not a link a reader may follow
LOADS = re.compile(
    r"<(?:link|script|img|source|iframe)\b[^>]*\b(?:href|src)=\"(https?:)?//[^\"]+\"|url\(['\"]?(?:https?:)?//", re.I
)


def test_no_page_asks_another_host_for_anything(site):
    offenders = []
    for f in [*site.rglob("*.html"), *site.rglob("*.css")]:
        text = f.read_text(encoding="utf-8", errors="replace")
        anchors_removed = re.sub(r"<a\b[^>]*>", "", text)
        offenders += [f"{f.relative_to(site)}: {m.group(0)[:120]}" for m in LOADS.finditer(anchors_removed)]
    assert offenders == []
    assert "fonts.googleapis" not in (site / "index.html").read_text(encoding="utf-8")


CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
# Runs in the test's copy of the page only: the tables' widths, names broken across lines, every resource loaded.
PROBE = """<script>
window.addEventListener('load', function () {
  var out = {page: document.documentElement.scrollWidth, tables: [], broken: [],
             resources: performance.getEntriesByType('resource').map(function (e) { return e.name; })};
  document.querySelectorAll('.md-typeset table').forEach(function (t) {
    var r = t.getBoundingClientRect();
    out.tables.push({width: t.scrollWidth, room: t.parentElement.clientWidth, right: r.right});
  });
  document.querySelectorAll('.md-typeset table td code').forEach(function (c) {
    if (c.getClientRects().length > 1) { out.broken.push(c.textContent); }
  });
  var pre = document.createElement('pre'); pre.id = 'layout-probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install -y chromium)")
def test_the_metric_reference_reads_whole_at_1280_px_with_the_network_off(site, tmp_path):
    import json

    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    page = copy / "reference" / "metrics" / "index.html"
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    shot = tmp_path / "metrics-1280.png"
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--hide-scrollbars",
        "--proxy-server=http://127.0.0.1:9",  # the network is off: a request to any other host fails
        f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2400", "--virtual-time-budget=5000",
        "--dump-dom", f"--screenshot={shot}", page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = re.search(r'<pre id="layout-probe">(.*?)</pre>', done.stdout, flags=re.S)
    assert probe, "the layout probe did not run"
    got = json.loads(probe.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert got["page"] <= 1280  # nothing sticks out sideways
    assert len(got["tables"]) >= 6
    for t in got["tables"]:
        assert t["width"] <= t["room"] and t["right"] <= 1280, t  # every column visible, none scrolled away
    assert got["broken"] == []  # no metric name wrapped mid-word
    assert [r for r in got["resources"] if not r.startswith("file:")] == []


def _app() -> Any:
    """The Typer app as its command group (typer ships its own click: read by duck typing)."""
    import typer.main

    from retbench.cli import app

    group = typer.main.get_command(app)
    assert hasattr(group, "commands")
    return group


def _check_line(group: Any, line: str) -> str | None:
    """None when the line's command and options exist; else what is wrong."""
    words = shlex.split(line)
    words = words[1:]  # the program
    cmd = group
    path = ["retbench"]
    while hasattr(cmd, "commands") and words and not words[0].startswith("-"):
        sub = cmd.commands.get(words[0])
        if sub is None:
            return f"no command {' '.join([*path, words[0]])!r}"
        path.append(words.pop(0))
        cmd = sub
    known = {
        opt for p in cmd.params if getattr(p, "param_type_name", "") == "option" for opt in (*p.opts, *p.secondary_opts)
    }
    for word in words:
        if word.startswith("[") or word.startswith("<"):
            continue  # a placeholder for optional parts: [--candidate DIR]
        name = word.split("=", 1)[0]
        if name.startswith("--") and name not in known:
            return f"{' '.join(path)} has no option {name} (it has: {', '.join(sorted(known))})"
    return None


def test_every_retbench_command_in_the_docs_names_real_commands_and_options():
    group = _app()
    bad, seen = [], 0
    for page, body in _fences("bash"):
        for line in _command_lines(body):
            words = line.split()
            if not words or not words[0].endswith("retbench"):
                continue
            seen += 1
            problem = _check_line(group, line)
            if problem:
                bad.append(f"{page.relative_to(ROOT)}: {line}\n    {problem}")
    assert seen >= 20, f"only {seen} retbench command lines found in docs/"
    assert bad == [], "\n".join(bad)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A folder holding the shipped corpora, configs and examples, where examples run as the docs show them."""
    root = tmp_path_factory.mktemp("docs-scratch")
    for name in ("corpora", "configs", "examples", "schemas"):
        (root / name).symlink_to(ROOT / name)
    (root / ".venv").symlink_to(Path(sys.executable).parents[1])
    model = local_model_file()
    if model is not None:  # the judge configs name the local model, looked up under $RETBENCH_CACHE/models
        (root / ".retbench-cache" / "models").mkdir(parents=True)
        (root / ".retbench-cache" / "models" / model.name).symlink_to(model)
    return root


def _env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETBENCH_HISTORY")}
    env["RETBENCH_HISTORY"] = str(scratch / "history.sqlite")
    env["RETBENCH_CACHE"] = str(scratch / ".retbench-cache")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "examples"), env.get("PYTHONPATH", "")])
    return env


def _python_examples() -> list[tuple[str, str]]:
    return [(f"{p.relative_to(DOCS).as_posix()}#{i}", body) for i, (p, body) in enumerate(_fences("python"))]


@pytest.mark.parametrize(("where", "code"), _python_examples(), ids=[w for w, _ in _python_examples()])
def test_every_python_example_runs(where, code, scratch):
    compile(code, where, "exec")
    if code.lstrip().lower().startswith("# a template"):
        return
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=scratch,
        env=_env(scratch),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{where}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


#: flows run end to end, each line exactly as some docs page writes it (quick BM25 + dense slice: minutes)
FLOWS = [
    ".venv/bin/retbench datasets list",
    ".venv/bin/retbench datasets info scifact",
    ".venv/bin/retbench run configs/quick.yaml --tag before-tuning",
    ".venv/bin/retbench history --metric ndcg@10 --html history.html",
    ".venv/bin/retbench export mlflow results/quick --tracking-uri sqlite:///mlflow.db --experiment retrievers",
]


def test_the_docs_main_shell_flows_run_as_written(scratch):
    written = {line for _, body in _fences("bash") for line in _command_lines(body)}
    for line in FLOWS:
        assert line in written, f"not in the docs any more: {line}"
    for line in FLOWS:
        if "mlflow" in line and shutil.which("mlflow", path=str(Path(sys.executable).parent)) is None:
            continue
        done = subprocess.run(
            shlex.split(line), cwd=scratch, env=_env(scratch), capture_output=True, text=True, timeout=1200, check=False
        )
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (scratch / "results" / "quick" / "metrics.json").is_file() and (scratch / "history.html").is_file()


# -- every command the README and the docs give is run, on the quick slice, or checked with a reason --------------
README = ROOT / "README.md"
#: docs lines that need the full corpus's results (`results/scifact`: encoding 5,183 abstracts takes minutes) or a
#: file of the reader's own, run instead on the quick slice that FLOWS made (`results/quick`: the 50-query slice)
ON_THE_SLICE = {
    ".venv/bin/retbench compare results/scifact": ".venv/bin/retbench compare results/quick",
    ".venv/bin/retbench report results/scifact --html report.html --markdown report.md": (
        ".venv/bin/retbench report results/quick --html report.html --markdown report.md"
    ),
    ".venv/bin/retbench plan --criteria configs/ship-criteria-scifact.yaml --baseline results/scifact "
    "--baseline-system bm25  [--candidate results/branch --candidate-system bm25] [--effect 0.03] "
    "[--llm-qrels labels/llm_qrels.txt]": (
        ".venv/bin/retbench plan --criteria configs/ship-criteria-scifact.yaml --baseline results/quick "
        "--baseline-system bm25 --candidate results/quick --candidate-system rank_bm25 --effect 0.03 "
        "--simulations 200 --flips 200"
    ),
    ".venv/bin/retbench eval corpora/scifact/qrels/test.tsv run.trec -m ndcg@10 -m recall@100 -m map -m mrr": (
        ".venv/bin/retbench eval corpora/scifact/qrels/test.tsv results/quick/systems/bm25/run.trec "
        "-m ndcg@10 -m recall@100 -m map -m mrr"
    ),
    ".venv/bin/retbench eval qrels.txt run.trec -m ndcg_cut.10 -m P.5,10 -m recip_rank --format trec -q": (
        ".venv/bin/retbench eval corpora/scifact/qrels/test.tsv results/quick/systems/bm25/run.trec "
        "-m ndcg_cut.10 -m P.5,10 -m recip_rank --format trec -q"
    ),
    ".venv/bin/retbench compare run_a.trec run_b.trec --qrels qrels.tsv": (
        ".venv/bin/retbench compare results/quick/systems/bm25/run.trec results/quick/systems/rank_bm25/run.trec "
        "--qrels corpora/scifact/qrels/test.tsv"
    ),
    ".venv/bin/retbench runs convert run.trec run.parquet": (
        ".venv/bin/retbench runs convert results/quick/systems/bm25/run.trec run.parquet"
    ),
    ".venv/bin/retbench runs convert run.parquet back.trec": ".venv/bin/retbench runs convert run.parquet back.trec",
    ".venv/bin/retbench runs fingerprint run.trec run.parquet back.trec": (
        ".venv/bin/retbench runs fingerprint results/quick/systems/bm25/run.trec run.parquet back.trec"
    ),
    ".venv/bin/retbench datasets info path/to/beir --strict": ".venv/bin/retbench datasets info corpora/scifact --strict",
    ".venv/bin/retbench judge-relevance results/scifact --judge configs/judge-calibration.yaml --depth 10 "
    "--max-queries 5 --dry-run": (
        ".venv/bin/retbench judge-relevance results/quick --judge configs/judge-calibration.yaml --depth 10 "
        "--max-queries 5 --dry-run"
    ),
    ".venv/bin/retbench tune configs/tune-bm25-scifact.yaml --max-queries 60 --output /tmp/t": (
        ".venv/bin/retbench tune configs/tune-bm25-scifact.yaml --max-queries 60 --output tune-60"
    ),
    ".venv/bin/retbench history --experiment quick --dataset scifact/test --system bm25 --json": (
        ".venv/bin/retbench history --experiment quick --dataset scifact/test --system bm25 --json"
    ),
}
#: the README's fast-tier command, run as written (it failed once while the whole suite passed: the unit tier's
#: own check, that no optional library was loaded, only applies when the unit tier runs alone)
FAST_TIER = ".venv/bin/python -m pytest tests/unit -x -q"
_FULL = "encodes the full SciFact corpus or runs every system on it (minutes); FLOWS run the quick slice"
_SERVERS = "starts database servers; tests/integration/test_services.py and the stores' tests run them"
_LLM = "needs an LLM server or LLM labels; tests/integration/llm run the local judge"
_MINE = "names the reader's own files (a golden set and outputs, two results folders); the same command runs above"
_LABEL_FREE = "the label-free how-to's walk-through: tests/integration/test_label_free_walkthrough.py runs it"
_STREAMING = (
    "the streaming case on the full SciFact corpus (minutes per store, servers for some): "
    "tests/integration/studies/stress/test_streaming_stores.py runs it on a slice"
)
#: commands only checked: each names a real command and only its options (the test above) and `--help` works
CHECKED_ONLY = {
    "bash scripts/setup.sh": "installs every package (minutes, a registry): checked with `bash -n`",
    "RETBENCH_LLAMA_CPP=1 bash scripts/setup.sh": "builds llama.cpp (minutes): checked with `bash -n`",
    ".venv/bin/python -m pytest": "the whole suite: this test is part of it",
    ".venv/bin/mkdocs build --strict": "the `site` fixture above runs it",
    ".venv/bin/mkdocs serve": "a server that runs until stopped: `--help` only",
    ".venv/bin/python -m llama_cpp.server --model .retbench-cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf  "
    "--model_alias qwen2.5-coder-1.5b-instruct-q4_k_m --host 127.0.0.1 --port 8090 --n_threads 2 --n_ctx 4096 &": _LLM,
    ".venv/bin/retbench run configs/scifact.yaml": _FULL,
    ".venv/bin/retbench run configs/suite.yaml": _FULL,
    ".venv/bin/retbench tune configs/tune-bm25-scifact.yaml": _FULL + " (its --max-queries 60 form runs)",
    ".venv/bin/retbench tune configs/tune-hybrid-scifact.yaml": _FULL,
    "PYTHONPATH=examples .venv/bin/retbench chunking configs/scoped.yaml": _FULL,
    ".venv/bin/retbench run configs/rag.yaml": _LLM,
    ".venv/bin/retbench report results/rag": _LLM + " (reports the run above)",
    ".venv/bin/retbench judge-calibrate configs/judge-calibration-llamacpp.yaml": _LLM,
    ".venv/bin/retbench eval corpora/scifact/qrels/test.tsv results/scifact/systems/bm25/run.trec  "
    "--llm-qrels results/scifact/labels/llm_qrels.txt --labels human+llm -m ndcg@10 -m judged@10 -m holes@10": _LLM,
    ".venv/bin/retbench datasets info irds:beir/scifact/test": "downloads through ir_datasets (no network in tests)",
    ".venv/bin/retbench eval irds:beir/scifact/test run.trec -m ndcg@10": "downloads through ir_datasets",
    ".venv/bin/retbench run configs/stores.yaml --services local": _SERVERS,
    'eval "$(.venv/bin/retbench services up configs/stores.yaml)"': _SERVERS,
    ".venv/bin/retbench services status": _SERVERS,
    ".venv/bin/retbench run configs/stores.yaml": _SERVERS,
    ".venv/bin/retbench services down": _SERVERS,
    ".venv/bin/retbench stress configs/stress-streaming.yaml --services local": _STREAMING,
    ".venv/bin/retbench stress configs/stress-streaming-typesense.yaml --services local": _STREAMING,
    ".venv/bin/retbench stress configs/stress-streaming-lancedb-hnsw.yaml": _STREAMING,
    ".venv/bin/retbench stress configs/stress-streaming-chroma.yaml": _STREAMING,
    ".venv/bin/retbench stress configs/stress-streaming-qdrant.yaml": _STREAMING,
    ".venv/bin/retbench stress configs/stress-streaming-milvus-hnsw.yaml --services local": _STREAMING,
    ".venv/bin/retbench eval golden.yaml outputs.jsonl --format json": _MINE,
    ".venv/bin/retbench eval golden.yaml outputs.jsonl -m recall@5 -m token_f1 -m rougeL -m abstention_accuracy": _MINE,
    ".venv/bin/retbench compare results/main results/branch": _MINE,
    ".venv/bin/retbench gate --criteria configs/ship-criteria.yaml --baseline results/main --candidate results/branch "
    "--comment comment.md": _MINE,
    ".venv/bin/retbench gate --criteria configs/ship-criteria-scifact.yaml --baseline results/main --candidate "
    "results/branch --baseline-system bm25 --candidate-system bm25 --comment comment.md": _MINE,
    ".venv/bin/retbench gate --criteria configs/ship-criteria.yaml --candidate results/quick  --candidate-system bm25 "
    "--baseline history:last-pass": "needs a gate that passed earlier in the history; tests/unit/test_gates.py has one",
    "retbench diff current.trec candidate.trec --k 10 --p 0.9 --html diff.html --json diff.json": _LABEL_FREE,
    "retbench canary canary.yaml --out canary/ --k 10": _LABEL_FREE,
    "retbench label prelabel canary/study --judge judge.yaml": _LABEL_FREE,
    "retbench label serve canary/study --labeller ann": _LABEL_FREE,
    "retbench compare --labels canary/study": _LABEL_FREE,
    "retbench gate --criteria criteria.yaml --labels canary/study --comment comment.md": _LABEL_FREE,
    "retbench gate --criteria movement.yaml --candidate canary/runs/candidate.trec --baseline canary/runs/current.trec "
    "--comment comment.md": _LABEL_FREE,
}


_STUDY = "names the reader's own traces or label study; the walk-through test runs the same commands on a real trace"
CHECKED_ONLY |= {
    "pip install 'retbench[labelpage]'": "installs from a registry: the extra is checked to exist in pyproject.toml",
    ".venv/bin/retbench gate --criteria criteria.yaml --labels study/ --comment comment.md": _STUDY,
    "retbench gate --criteria criteria.yaml --labels study/ --comment comment.md": _STUDY,
    "retbench label init study/ --dataset traces/ --runs bm25.trec --k 10 --metric nDCG@10 "
    "--decision live-langchain,bm25": _STUDY,
    "retbench label init study/ --dataset traces/ --systems systems.yaml --decision live-langchain,bm25": _STUDY,
    "retbench label next study/ --budget 200": _STUDY,
    "retbench label serve STUDY": _STUDY,
    "retbench label serve STUDY --port 0 --labeller ann": _STUDY,
    "retbench label serve study/": _STUDY,
    "retbench label status study/": _STUDY,
    "retbench traces import spans.json more-spans.jsonl --out datasets/live --since 2026-05-01 --until 2026-06-01  "
    "--max-queries 500 --seed 7": _STUDY,
}
#: commands another test runs exactly as written: the walk-through test runs each, in a real trace's folder
RUN_ELSEWHERE = set(WALK)


def _readme_and_docs_commands() -> set[str]:
    """Every shell line of a `bash` block in the README and the docs, and every `.venv/bin/...` command the
    README names inline."""
    found = {line for _, body in _fences("bash") for line in _command_lines(body)}
    text = README.read_text(encoding="utf-8")
    found |= {line for kind, body in FENCE.findall(text) if kind == "bash" for line in _command_lines(body)}
    found |= set(re.findall(r"`(\.venv/bin/[^`]+)`", text))
    return found


def test_every_command_the_readme_and_docs_give_is_run_or_checked_with_a_reason():
    placed = set(FLOWS) | set(ON_THE_SLICE) | set(CHECKED_ONLY) | RUN_ELSEWHERE | {FAST_TIER}
    given = _readme_and_docs_commands()
    assert sorted(given - placed) == [], (
        "a command in the docs that no test runs: add it to ON_THE_SLICE or CHECKED_ONLY"
    )
    assert sorted(placed - given) == [], "no longer in the docs"


def test_commands_only_checked_start_as_written(scratch):
    group = _app()
    for line, why in CHECKED_ONLY.items():
        assert why
        words = shlex.split(line.replace('eval "$(', "").replace(')"', "").rstrip(" &"))
        while "=" in words[0]:
            words.pop(0)  # VAR=value before the program
        if words[:2] == ["pip", "install"]:
            extra = re.fullmatch(r"retbench\[(\w+)\]", words[2])
            assert extra and f"\n{extra.group(1)} = [" in (ROOT / "pyproject.toml").read_text(encoding="utf-8"), line
            continue
        if words[0] == "bash":
            done = subprocess.run(["bash", "-n", str(ROOT / words[1])], capture_output=True, text=True, check=False)
        elif words[0].endswith("retbench"):
            assert _check_line(group, " ".join(words)) is None, line
            sub = [w for w in words[1:3] if not w.startswith("-") and "/" not in w and "." not in w]
            done = subprocess.run(
                [sys.executable, "-m", "retbench.cli", *sub, "--help"], cwd=scratch, env=_env(scratch),
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
        elif words[:3] == [".venv/bin/python", "-m", "pytest"] or words[:2] == [".venv/bin/mkdocs", "build"]:
            continue  # this suite; the site fixture
        elif words[0] == ".venv/bin/mkdocs":
            done = subprocess.run([str(Path(sys.executable).with_name("mkdocs")), words[1], "--help"],
                                  capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        else:  # python -m llama_cpp.server: an optional build
            if importlib.util.find_spec(words[2].split(".")[0]) is None:
                continue  # not installed here (RETBENCH_LLAMA_CPP=1 bash scripts/setup.sh builds it)
            done = subprocess.run([sys.executable, "-m", words[2], "--help"], capture_output=True, text=True,
                                  timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, f"{line}\n{done.stdout[-1000:]}\n{done.stderr[-2000:]}"


def test_docs_commands_run_on_the_quick_slice(scratch):
    if not (scratch / "results" / "quick" / "metrics.json").is_file():  # made by the flows test when it ran first
        done = subprocess.run(
            shlex.split(FLOWS[2]), cwd=scratch, env=_env(scratch), capture_output=True, text=True, timeout=1200,
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    for written, line in ON_THE_SLICE.items():
        done = subprocess.run(
            shlex.split(line), cwd=scratch, env=_env(scratch), capture_output=True, text=True, timeout=900, check=False
        )
        assert done.returncode == 0, f"{written}\nran: {line}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (scratch / "report.html").is_file() and (scratch / "tune-60").is_dir()


@pytest.mark.background([sys.executable, *shlex.split(FAST_TIER)[1:]], cwd=ROOT)
def test_the_readmes_fast_tier_command_passes_as_written(background_result):
    """`pytest tests/unit -x -q` as the README gives it: the unit tier alone, with its own check that it loaded no
    optional library (pandas, torch, ...), which a whole-suite run does not apply. It runs in its own pytest
    session beside this one (tests/support/background.py), with temporary folders of its own."""
    assert FAST_TIER in README.read_text(encoding="utf-8")
    done = background_result
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    [tiers] = [line for line in done.stdout.splitlines() if line.startswith("tier times: ")]  # tests/conftest.py's
    assert tiers.startswith("tier times: unit ") and ", " not in tiers, tiers  # the unit tier ran, and no other
