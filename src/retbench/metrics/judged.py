"""LLM-judged answer metrics: pure functions of stored judge verdicts (see `studies/judging.py`).

The judging stage asks the judge for verdicts and stores them per query; these metrics only read
them, so re-scoring costs no call. Formulas (RAGAS: Es et al., 2023, "RAGAS: Automated Evaluation of
Retrieval Augmented Generation", for the first four):

- `faithfulness` = supported claims / claims, where the claims are the atomic statements the judge
  extracts from the answer and each is attributed (or not) to the retrieved context; 1.0 when the
  answer makes no claim;
- `context_precision` = sum_k (precision@k * v_k) / (number of relevant chunks in the top K), where
  v_k is the judge's relevance verdict (1/0) for the chunk at rank k of the top-K context and
  precision@k = (v_1 + ... + v_k) / k; 0 when no chunk is relevant;
- `context_recall` = reference statements supported by the context / reference statements, where
  the statements are extracted from the (first) reference answer;
- `answer_relevance` = mean over the N questions the judge writes for the answer of
  cos(embed(original question), embed(generated question)), with the experiment's encoder;
- `groundedness` (0-5): the judge's score of how well the answer's claims are supported by the
  context (5 = all supported and cited ... 0 = unrelated), with its `supported_claims` and
  `unsupported_claims` lists stored beside it;
- `correctness` (0-5): the judge's score of the answer against the reference answer(s), with its
  reasoning stored beside it.

Where a metric applies: faithfulness, groundedness and answer relevance to every query the system
answered (an abstention or an empty answer has nothing to judge: NaN); correctness and context
recall to answerable questions with a reference answer; context precision to answerable questions.
An answer that could not be produced (`error`) scores 0 where the metric applies, as every answer
metric does; correctness scores 0 for an answerable question the system did not answer; an empty
context gives 0 context precision and recall. A verdict that failed (`judge_error`,
`judge_timeout`, `unparseable`) or was never asked for (`not_judged`) is NaN and is counted: reports
say "judged N of M" (N scored of the M queries the metric applies to).

A system output without an `abstained` field gets the judge's abstention classification, which
`abstention_accuracy` and `hallucination_rate` then use (metrics/answers.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from retbench.data.answers import SystemAnswer, abstained
from retbench.data.corpus import Sample
from retbench.metrics.base import Builtin, MetricContext

#: one query's outcome for a metric: a value, None (does not apply) or a status (verdict failed)
Outcome = float | str | None
Records = Mapping[str, Any]  # one query's stored judge records: kind -> {status, value}, as the judge wrote them
#: a judged metric's per-query outcome from (golden sample, the system's answer, stored records)
OutcomeFn = Callable[["Sample | None", SystemAnswer | None, Records | None], Outcome]


# -- formulas -----------------------------------------------------------------------------------------
def faithfulness(supported: Sequence[bool]) -> float:
    """Supported claims / claims; 1.0 when the answer makes no claim."""
    return 1.0 if not supported else sum(map(bool, supported)) / len(supported)


def context_precision(relevant: Sequence[bool]) -> float:
    """sum_k precision@k * v_k / relevant chunks (v_k: rank k's verdict); 0 with no relevant chunk."""
    hits, total = 0, 0.0
    for k, v in enumerate(relevant, 1):
        if v:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def context_recall(supported: Sequence[bool]) -> float:
    """Reference statements supported by the context / statements (NaN with no statement)."""
    return sum(map(bool, supported)) / len(supported) if supported else math.nan


def answer_relevance(cosines: Sequence[float]) -> float:
    """Mean cosine between the question and each question generated from the answer."""
    return float(np.mean(cosines)) if len(cosines) else math.nan


# -- reading stored verdicts ---------------------------------------------------------------------------
def verdict(records: Records | None, kind: str) -> tuple[Any, str]:
    """(value, "ok") of a stored verdict, else (None, its status); never asked for: "not_judged"."""
    rec = (records or {}).get(kind)
    if not isinstance(rec, Mapping):
        return None, "not_judged"
    return (rec.get("value"), "ok") if rec.get("status") == "ok" else (None, str(rec.get("status")))


def given_text(answer: SystemAnswer | None) -> str | None:
    """The answer text when the system gave one (no error, not abstained, not empty)."""

    if answer is None or answer.error is not None or abstained(answer) or not (answer.text or "").strip():
        return None
    return answer.text


def references(sample: Sample | None) -> list[str]:
    """Reference answers of an answerable sample ([] for unanswerable samples and samples without one)."""
    if sample is None or getattr(sample, "answerable", None) is False:
        return []
    return [r for r in getattr(sample, "answers", None) or [] if r and r.strip()]


def answerable(sample: Sample | None) -> bool:
    return sample is None or getattr(sample, "answerable", None) is not False


def answer_side(kind: str, extract: Callable[[Any], Outcome]) -> OutcomeFn:
    """A metric over a given answer: NaN when the system gave none, 0 when it failed, else `extract`."""

    def fn(sample: Sample | None, answer: SystemAnswer | None, records: Records | None) -> Outcome:
        if answer is not None and answer.error is not None:
            return 0.0
        if given_text(answer) is None:
            return None
        value, status = verdict(records, kind)
        return extract(value) if status == "ok" else status

    return fn


def _faithfulness(sample: Sample | None, answer: SystemAnswer | None, records: Records | None) -> Outcome:
    if answer is not None and answer.error is not None:
        return 0.0
    if given_text(answer) is None:
        return None
    return _supported(records, "answer", faithfulness, no_claims=1.0)


def _supported(
    records: Records | None, side: str, score: Callable[[Sequence[bool]], float], no_claims: Outcome
) -> Outcome:
    """`score` of the support verdicts of the `<side>_claims` statements against the context."""
    claims, status = verdict(records, f"{side}_claims")
    if status != "ok":
        return status
    if not claims:
        return no_claims
    if not (records or {}).get("context"):
        return score([False] * len(claims))  # an empty context supports nothing
    support, status = verdict(records, f"{side}_support")
    return score(support) if status == "ok" else status


def _context_only(records: Records | None) -> Outcome:
    """A context metric's outcome decided by the context alone: never judged, or empty (0); else None."""
    if records is None or "context" not in records:
        return "not_judged"
    return 0.0 if not records["context"] else None


def _context_recall(sample: Sample | None, answer: SystemAnswer | None, records: Records | None) -> Outcome:
    if not references(sample):
        return None
    if (early := _context_only(records)) is not None:
        return early
    return _supported(records, "reference", context_recall, no_claims=None)  # no statement: nothing to recall


def _context_precision(sample: Sample | None, answer: SystemAnswer | None, records: Records | None) -> Outcome:
    if not answerable(sample):
        return None
    early = _context_only(records)
    if early is not None or records is None:
        return early
    chunks = records.get("chunks")
    if not isinstance(chunks, list) or len(chunks) != len(records["context"]):
        return "not_judged"
    bad = next((c.get("status") for c in chunks if c.get("status") != "ok"), None)
    return str(bad) if bad else context_precision([bool(c.get("value")) for c in chunks])


def _correctness(sample: Sample | None, answer: SystemAnswer | None, records: Records | None) -> Outcome:
    if not references(sample):
        return None
    if given_text(answer) is None:
        return 0.0  # an answerable question left unanswered (or failed) is not a correct answer
    value, status = verdict(records, "correctness")
    return float(value["score"]) if status == "ok" else status


#: metric name -> per-query outcome function (sample, answer, stored records)
OUTCOMES: dict[str, OutcomeFn] = {
    "faithfulness": _faithfulness,
    "context_precision": _context_precision,
    "context_recall": _context_recall,
    "answer_relevance": answer_side("questions", lambda v: answer_relevance(v["cosines"])),
    "groundedness": answer_side("groundedness", lambda v: float(v["score"])),
    "correctness": _correctness,
}


def judged_abstention(answer: SystemAnswer | None, records: Records | None) -> bool | str | None:
    """The judge's abstention verdict when the output does not say (None: the output says, or no text)."""
    if answer is None or answer.abstained is not None or answer.error is not None or not (answer.text or "").strip():
        return None
    value, status = verdict(records, "abstention")
    return bool(value) if status == "ok" else status


# -- per query, per metric -----------------------------------------------------------------------------
def outcomes(
    metric: str,
    samples: Sequence[Sample | None],
    answers: Mapping[str, SystemAnswer] | None,
    judged: Mapping[str, Records] | None,
    qids: Sequence[str],
) -> list[Outcome]:
    """Each query's outcome for one judged metric (value, None = not applicable, or a failed status)."""
    fn = OUTCOMES[metric]
    out = []
    for i, q in enumerate(qids):
        sample = samples[i] if samples else None
        out.append(fn(sample, (answers or {}).get(q), (judged or {}).get(q)))
    return out


def counts(values: Sequence[Outcome]) -> dict[str, int | dict[str, int]]:
    """{"judged": N, "of": M, "statuses": {...}}: N scored of the M queries the metric applies to."""
    statuses: dict[str, int] = {}
    for v in values:
        if v is not None:
            key = v if isinstance(v, str) else "ok"
            statuses[key] = statuses.get(key, 0) + 1
    return {"judged": statuses.get("ok", 0), "of": sum(statuses.values()), "statuses": statuses}


def column(ctx: MetricContext, metric: str) -> np.ndarray:
    """The metric's per-row values: NaN where it does not apply or its verdict failed."""
    vals = outcomes(metric, ctx.samples, ctx.answers, ctx.judged, ctx.gm.query_ids)
    return np.array([v if isinstance(v, float) else np.nan for v in vals], dtype=np.float64)


#: every judged metric's name: a live view, so the rubric metrics a config declares (metrics/rubric.py) are in it
JUDGED_METRICS = OUTCOMES.keys()


def builtins() -> list[Builtin]:
    """These metrics as registry entries (the registry registers them at import)."""

    def entry(name: str, description: str, meaning: str, value_range: tuple[float, float] = (0.0, 1.0)) -> Builtin:
        return Builtin(
            name,
            "none",
            lambda c, k, lv, p: column(c, name),
            description,
            binary=False,
            value_range=value_range,
            answer_side=True,
            meaning=meaning,
            unit="share" if meaning.startswith("share of") else "score",  # a share prints as a percentage
        )

    return [
        entry(
            "faithfulness",
            "judged: answer claims supported by the retrieved context / claims",
            "share of the answer's claims that the retrieved passages support (an LLM judges each claim)",
        ),
        entry(
            "context_precision",
            "judged: rank-weighted precision of the relevant chunks in the context",
            "how high the passages an LLM judges useful sit among those given to the model",
        ),
        entry(
            "context_recall",
            "judged: reference statements supported by the context / statements",
            "share of the reference answer's statements that the retrieved passages support (LLM-judged)",
        ),
        entry(
            "answer_relevance",
            "judged: mean cosine of questions generated from the answer with the question",
            "how closely questions an LLM writes back from the answer match the question asked",
            (-1.0, 1.0),
        ),
        entry(
            "groundedness",
            "judged 0-5: the answer's claims supported by the context",
            "an LLM's 0-5 grade of how well the passages back the answer's claims",
            (0.0, 5.0),
        ),
        entry(
            "correctness",
            "judged 0-5: the answer against the reference answer(s)",
            "an LLM's 0-5 grade of the answer against the reference answer(s)",
            (0.0, 5.0),
        ),
    ]
