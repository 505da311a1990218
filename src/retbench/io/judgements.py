"""The files `retbench eval` scores: judgements (TREC qrels, BEIR qrels or folder, golden set) and a
system's ranking (TREC run file, or system outputs with their texts and answers)."""

from __future__ import annotations

from pathlib import Path

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
        from retbench.io.golden import read_outputs  # deferred, as above

        out = read_outputs(p)
        return out.run, out.texts, out.answers

    return read_run(p), {}, {}
