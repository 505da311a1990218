"""The files `retbench eval` scores: judgements (TREC qrels, BEIR qrels or folder, golden set), LLM qrels with
their provenance and how they combine with human ones, and a system's ranking (TREC run file, or system outputs
with their texts and answers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from retbench.data import Qrels, Run
from retbench.data.answers import SystemAnswer
from retbench.data.corpus import Sample
from retbench.data.samples import qrels_from_samples
from retbench.errors import InputError
from retbench.io.beir import qrels_splits, read_qrels_tsv
from retbench.io.files import iter_lines, require_file
from retbench.io.irds import PREFIX as IRDS_PREFIX
from retbench.io.irds import read_irds_qrels
from retbench.io.trec import read_qrels, read_run

GOLDEN_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".jsonl.gz")
#: which labels score a run: human qrels, LLM qrels (`retbench judge-relevance`), or both (a human label wins)
LABEL_SOURCES = ("human", "llm", "human+llm")
#: the provenance file written beside LLM qrels (model, prompt, pool depth)
PROVENANCE_FILE = "llm_qrels.provenance.json"


def _is_golden(path: Path) -> bool:
    return path.name.endswith(GOLDEN_SUFFIXES)


def read_judgements(path: str | Path, split: str = "test") -> tuple[Qrels, list[Sample] | None]:
    """Judgements from a TREC qrels file, a BEIR qrels .tsv, a BEIR folder (its `split`), a golden set or
    `irds:<id>` (the qrels of an ir_datasets dataset).

    Returns (qrels, samples); samples are None unless the file is a golden set.
    """
    if str(path).startswith(IRDS_PREFIX):
        return read_irds_qrels(str(path)[len(IRDS_PREFIX) :]), None
    p = Path(path)
    if p.is_dir():
        splits = qrels_splits(p)
        if split not in splits:
            raise InputError(
                f"no qrels split {split!r} (have: {', '.join(sorted(splits)) or 'none'})", path=p, field="split"
            )
        return read_qrels_tsv(splits[split])[0], None
    require_file(p, "qrels file")
    if _is_golden(p):
        from retbench.io.golden import read_golden  # deferred: golden sets need PyYAML, TREC files do not (start-up)

        samples = read_golden(p)
        return qrels_from_samples(samples), samples
    first = next((line for _, line in iter_lines(p) if line.strip()), "")
    if first.count("\t") == 2 or first.lower().startswith("query-id"):
        return read_qrels_tsv(p)[0], None

    return read_qrels(p), None


def read_system(path: str | Path) -> tuple[Run, dict[str, str], dict[str, SystemAnswer]]:
    """A system's ranking: a TREC run file, or system outputs (JSONL/JSON/YAML `{"id", "retrieved"}`)
    with their texts and answer side (`answer`, `references`, `abstained`, `latency`)."""
    p = Path(path)
    if _is_golden(p):
        from retbench.io.outputs import read_outputs  # deferred, as above

        out = read_outputs(p)
        return out.run, out.texts, out.answers

    return read_run(p), {}, {}


def combine_labels(source: str, human: Qrels, llm: Qrels | None) -> Qrels:
    """The labels an evaluation uses: `human`, `llm`, or `human+llm` (a human label always wins)."""
    if source not in LABEL_SOURCES:
        raise InputError(f"unknown label source {source!r}; expected one of {', '.join(LABEL_SOURCES)}", field="labels")
    if source == "human":
        return human
    if llm is None:
        raise InputError(f"labels {source!r} need LLM qrels (--llm-qrels)", field="labels")
    if source == "llm":
        return llm
    merged = {q: dict(docs) for q, docs in llm.to_dict().items()}
    for q, docs in human.to_dict().items():
        merged.setdefault(q, {}).update(docs)
    return Qrels({q: merged[q] for q in [*human, *(q for q in llm if q not in human)]})


def read_llm_qrels(path: str | Path) -> tuple[Qrels, dict[str, Any]]:
    """LLM qrels as `label_pairs` writes them, with the provenance file beside them ({} when there is none).

    The provenance's `depth` (the pool depth) is the depth `estimates.doubly_labelled` checks.
    """
    p = Path(path)
    qrels = read_qrels(p)
    side = p.with_name(PROVENANCE_FILE)
    if not side.is_file():
        return qrels, {}
    try:
        provenance = json.loads(side.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON: {err.msg}", path=side, line=err.lineno) from None
    if not isinstance(provenance, dict):
        raise InputError("expected a JSON object", path=side)
    return qrels, provenance
