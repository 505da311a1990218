"""The judging stage's rubric verdicts: one call per (query, rubric metric) where the metric applies.

Each rubric metric the experiment asks for gets its own `Judge` (llm/judge.py): the rubric's prompt
(llm/rubric.py, whose identity carries the rubric's whole definition), its verdict parser, the grades of
its scale (for token probabilities), and the experiment's judge or the rubric's own `judge:`. Verdicts are
stored under `rubric:<name>` beside the built-in judged metrics' in `judged.json` (value: `{"value",
"reasoning"}`), every call is logged to the same `judge_calls.jsonl`, and its tokens and cost count in the
stage's totals. A query is asked only where the metric applies and its value is not already decided
(metrics/rubric.py: no reference answer, no answer given, an answer that failed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from retbench.config.judge import JudgeSettings
from retbench.config.rubric import RubricBlock
from retbench.data.answers import SystemAnswer
from retbench.data.corpus import Sample
from retbench.estimates import Estimate, estimate_block
from retbench.evaluation import Evaluation
from retbench.llm.generate import numbered
from retbench.llm.rubric import material, rubric_prompt
from retbench.metrics.judged import given_text, references
from retbench.metrics.registry import value_range
from retbench.metrics.rubric import Rubric, rubric_of
from retbench.stats.ppi import ppi_mean
from retbench.studies.labels.rubric_calibrate import human_verdict

#: (key: query id and record name[, doc id], the prompt's fields): one question to a judge
Item = tuple[tuple[str, ...], dict[str, str]]


def asked_rubrics(metrics: Sequence[str], blocks: Sequence[RubricBlock]) -> list[tuple[Rubric, JudgeSettings | None]]:
    """The rubric metrics among `metrics`: the config's definition (with its own judge, if any), else the shipped one."""
    own = {b.name: b for b in blocks}
    out = []
    for m in metrics:
        if m in own:
            out.append((own[m].to_rubric(), own[m].judge))
        elif (r := rubric_of(m)) is not None:
            out.append((r, None))
    return out


def deepest(rubrics: Sequence[tuple[Rubric, JudgeSettings | None]], context_k: int) -> int:
    """How many retrieved passages the stage needs: the judging context and every rubric's own k."""
    return max([context_k, *(r.k or context_k for r, _ in rubrics)])


def rubric_items(
    rubric: Rubric,
    context_k: int,
    max_chars: int,
    questions: Mapping[str, str],
    samples: Mapping[str, Sample],
    answers: Mapping[str, SystemAnswer],
    ranked: Mapping[str, Sequence[str]],
    texts: Callable[[str], str],
) -> list[Item]:
    """(key (qid, "rubric:<name>"), prompt fields) for every query whose value the judge decides."""
    items: list[Item] = []
    for q, question in questions.items():
        sample, answer = samples.get(q), answers.get(q)
        if rubric.outcome(sample, answer, None) != "not_judged":
            continue  # not applicable, or decided without a judge (no answer, a failed answer)
        fields = material(
            rubric,
            query=question,
            answer=given_text(answer),
            references=references(sample),
            passages=numbered(texts, list(ranked.get(q, ()))[: rubric.k or context_k], max_chars),
            negatives=list(getattr(sample, "negative_answers", None) or []),
        )
        items.append(((q, rubric.record), fields))
    return items


def rubric_identity(rubrics: Sequence[tuple[Rubric, JudgeSettings | None]]) -> dict[str, object]:
    """What the rubric verdicts depend on (part of a cell's config hash): each definition, prompt and judge."""
    return {
        r.name: {
            "definition": r.definition(),
            "prompt": rubric_prompt(r).describe(),
            **({"judge": own.to_manifest()} if own is not None else {}),
        }
        for r, own in rubrics
    }


def rubric_estimates(ev: Evaluation, samples: Mapping[str, Sample], alpha: float = 0.05) -> dict[str, Estimate]:
    """{rubric metric: prediction-powered `estimate` entry} where people gave verdicts on some samples.

    `stats.ppi_mean` (classical PPI): the human verdicts (`metadata.human: {metric: value}`, on the rubric's
    scale) of the samples that have both, the metric's per-query values on those samples and on the samples
    people did not verdict; only where at least 2 samples have both and 1 more has a value. A human verdict
    off the scale is an input error, as calibration makes it.
    """
    out: dict[str, Estimate] = {}
    for m in ev.metrics:
        rubric = rubric_of(m)
        if rubric is None:
            continue
        col = ev.column(m)
        pairs, unlabelled = [], []
        for i, q in enumerate(ev.query_ids):
            given = ((getattr(samples.get(q), "metadata", None) or {}).get("human") or {}).get(m)
            if np.isnan(col[i]):
                continue
            if given is None:
                unlabelled.append(col[i])
            else:
                pairs.append((human_verdict(rubric, given, "golden set", f"{q}.metadata.human.{m}"), col[i]))
        if len(pairs) >= 2 and unlabelled:
            y, f = np.array(pairs, dtype=float).T
            est, low, high = ppi_mean(y, f, np.array(unlabelled), alpha=alpha)
            out[m] = estimate_block("ppi", len(pairs), len(pairs) + len(unlabelled), est, low, high, value_range(m))
    return out
