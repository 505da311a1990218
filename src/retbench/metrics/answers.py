"""Deterministic answer metrics: a system's answer against reference answers, citations and abstention.

Each metric gives one value per query and NaN where it does not apply (the mean, CIs, breakdowns,
paired comparisons and gates count only the queries a metric applies to, and reports show "N of M"):

- answer-vs-reference metrics apply to samples with at least one reference answer; each takes the
  best (maximum) over the references. A query the system did not answer (no answer text, or it
  abstained) scores 0 there;
- `exact_match` and `token_f1` follow the SQuAD evaluation script (Rajpurkar et al., 2016):
  normalize = lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace;
  EM = [normalize(answer) == normalize(reference)]; token F1 = 2PR / (P + R) with P = common
  tokens / answer tokens and R = common tokens / reference tokens (common counted with
  multiplicity); when either side has no token, F1 = [both have none];
- `bleu`: sentence-level BLEU (Papineni et al., 2002) as sacrebleu's `sentence_bleu` computes it
  (13a tokenizer, exponential smoothing), divided by 100, for each reference alone, best taken;
- `rouge1`, `rouge2`, `rougeL`: the F-measure of ROUGE-N and ROUGE-L (Lin, 2004) as the
  rouge-score package computes it (its default tokenizer, no stemming), best over the references;
- `reference_containment`: 1 if some normalized reference answer occurs in the normalized answer;
- `attribution` (attribution hit rate): applies to answerable samples with a gold support; 1 if
  some cited reference matches a gold support: the same id, or by the anchor rule (same document,
  and the cited heading path starts with the gold one, `guide.md > Refunds > Window` matches gold
  `guide.md > Refunds` and gold `guide.md`);
- a cited *chunk* also stands for its place in its document: when the corpus is chunked (a corpus
  whose records carry `metadata.doc_id` or `rel_path`, and `heading_path`, as `ChunkSet.to_corpus`
  writes them, or a `ChunkSet`), chunk `c7` of `guide.md` under `Refunds > Window` also cites the
  anchor `guide.md > Refunds > Window`, so it matches gold `guide.md` and gold `guide.md > Refunds`.
  Only citations are mapped up, never gold supports: a gold chunk is matched by citing that chunk,
  not its document or a sibling chunk (no over-credit);
- `recency_conflict`: applies to samples with a `recency_conflict_rule`, whose gold supports are the
  conflicting notes listed oldest first (the last is the newer). A support counts as cited under the
  attribution rule above. `cite_newer`: 1 if the newer note is cited and no older one is (citing the
  outdated note means the answer may rest on it); `cite_both` and `acknowledge_both`: 1 if every
  note is cited. That the answer *acknowledges* the conflict is a judgement about its text, which
  needs the LLM judge; this metric checks only the citations `acknowledge_both` requires;
- `abstention_accuracy` / `hallucination_rate`: apply only to samples marked `answerable: false`;
  1 if the system abstained / 1 if it answered anyway. A system abstained when its output says
  `abstained: true`, or, when it does not say, when the judge classified its answer as an
  abstention (an experiment with a `judge:` block, metrics/judged.py; a failed verdict is NaN), or
  else when it gave no answer text;
- an answer that could not be produced (`error`, e.g. a generation call that timed out) scores 0 on
  every answer metric that applies, as a failed query scores 0 on retrieval metrics;
- `negative_match`: applies to samples with negative answers; 1 if the answer equals or contains a
  known-wrong answer (normalized as above). Lower is better, as for `hallucination_rate`.
"""

from __future__ import annotations

import re
import string
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from retbench.chunkers.headings import normalize_heading_path
from retbench.data.answers import SystemAnswer, abstained
from retbench.errors import InputError
from retbench.metrics.base import Builtin, MetricContext
from retbench.metrics.judged import judged_abstention

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def squad_normalize(text: str) -> str:
    """SQuAD's normalize_answer: lowercase, punctuation removed, articles a/an/the removed, whitespace collapsed."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def exact_match(answer: str, reference: str) -> float:
    return float(squad_normalize(answer) == squad_normalize(reference))


def token_f1(answer: str, reference: str) -> float:
    """SQuAD token F1 (see the module docstring)."""
    pred, gold = squad_normalize(answer).split(), squad_normalize(reference).split()
    if not pred or not gold:
        return float(pred == gold)
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def contains_reference(answer: str, reference: str) -> float:
    needle = squad_normalize(reference)
    return float(bool(needle) and needle in squad_normalize(answer))


def _missing(package: str) -> InputError:
    return InputError(
        f"this answer metric needs the {package} package: pip install 'retbench[answers]'", field="metrics"
    )


def bleu(answer: str, reference: str) -> float:
    """sacrebleu's sentence BLEU / 100 against one reference."""
    try:
        import sacrebleu
    except ImportError:
        raise _missing("sacrebleu") from None
    return float(sacrebleu.sentence_bleu(answer, [reference]).score) / 100.0


@lru_cache(maxsize=1)
def _rouge_scorer() -> Any:
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise _missing("rouge-score") from None
    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)


def rouge(answer: str, reference: str, kind: str) -> float:
    """The F-measure of one ROUGE kind (rouge1, rouge2, rougeL) against one reference."""
    return float(_rouge_scorer().score(reference, answer)[kind].fmeasure)


def best(fn: Callable[[str, str], float], answer: str, references: Sequence[str]) -> float:
    """The best value of `fn` over the references (the usual multi-reference rule)."""
    return max(fn(answer, r) for r in references)


# -- per-query plumbing ---------------------------------------------------------------------------------
def _answer(ctx: MetricContext, i: int) -> SystemAnswer | None:
    answers = ctx.answers or {}
    return answers.get(ctx.gm.query_ids[i])


def _given_text(answer: SystemAnswer | None) -> str | None:
    """The answer text when the system answered (no error, not abstained, text present)."""
    if answer is None or answer.error is not None or abstained(answer) or not (answer.text or "").strip():
        return None
    return answer.text


def against_references(ctx: MetricContext, fn: Callable[[str, str], float]) -> np.ndarray:
    """Best of `fn` over each sample's reference answers; NaN where a sample has none; 0 with no answer."""
    out = np.full(len(ctx.gm), np.nan)
    for i, sample in enumerate(ctx.samples):
        refs = list(getattr(sample, "answers", None) or []) if sample is not None else []
        if not refs or getattr(sample, "answerable", None) is False:
            continue
        text = _given_text(_answer(ctx, i))
        out[i] = 0.0 if text is None else best(fn, text, refs)
    return out


def rouge_metric(kind: str) -> Callable[[str, str], float]:
    return lambda a, r: rouge(a, r, kind)


def _anchor(ref: str) -> tuple[str, tuple[str, ...]]:
    """(document, heading path) of an id or an anchor string `doc > heading > path`."""

    parts = normalize_heading_path(ref)
    return (parts[0], parts[1:]) if parts else (ref, ())


def chunk_anchor(ref: str, texts: object) -> str | None:
    """`doc > heading > path` of a cited chunk: from a ChunkSet, or a corpus record's metadata
    (`doc_id` or `rel_path`, and `heading_path`); None when `ref` is not a chunk of a known document."""
    from retbench.chunkers import ChunkSet
    from retbench.data import Corpus

    doc: object
    heading: object
    if isinstance(texts, ChunkSet):
        if ref not in texts.index:
            return None
        doc, heading = texts[ref].doc_id, texts[ref].heading_path
    elif isinstance(texts, Corpus) and texts.metadata is not None and ref in texts:
        meta = texts.metadata[texts.index[ref]] or {}
        doc, heading = meta.get("doc_id") or meta.get("rel_path"), meta.get("heading_path") or ()
    else:
        return None
    if not isinstance(doc, str) or not isinstance(heading, (str, list, tuple)):
        return None
    return " > ".join((doc, *normalize_heading_path(heading))) if doc != ref else None


def cited(references: Sequence[str], texts: object = None) -> list[str]:
    """The citations with, after each cited chunk, the anchor of its place in its document."""
    out = []
    for ref in references:
        out.append(ref)
        if texts is not None and (anchor := chunk_anchor(ref, texts)) is not None:
            out.append(anchor)
    return out


def cites_support(references: Sequence[str], supports: Sequence[str], texts: object = None) -> bool:
    """True if a cited reference (or its chunk's document anchor) is a gold support or lies under one."""
    refs = cited(references, texts)
    if set(refs) & set(supports):
        return True
    gold = [_anchor(s) for s in supports]
    for ref in refs:
        doc, path = _anchor(ref)
        if any(doc == gdoc and path[: len(gpath)] == gpath for gdoc, gpath in gold):
            return True
    return False


def attribution(ctx: MetricContext, level: int) -> np.ndarray:
    """1 if the answer cites a gold support; NaN for unanswerable samples and samples without supports."""
    out = np.full(len(ctx.gm), np.nan)
    qrels: Mapping[str, Mapping[str, int]] = ctx.qrels or {}
    for i in range(len(ctx.gm)):
        sample = ctx.samples[i] if ctx.samples else None
        if sample is not None and sample.answerable is False:
            continue
        supports = [d for d, g in qrels.get(ctx.gm.query_ids[i], {}).items() if g >= level]
        if not supports:
            continue
        answer = _answer(ctx, i)
        out[i] = float(answer is not None and cites_support(answer.references, supports, ctx.texts))
    return out


def recency_conflict(ctx: MetricContext, level: int) -> np.ndarray:
    """The citation part of a sample's `recency_conflict_rule` (module docstring); NaN for samples without one."""
    out = np.full(len(ctx.gm), np.nan)
    for i, sample in enumerate(ctx.samples):
        rule = getattr(sample, "recency_conflict_rule", None) if sample is not None else None
        if not rule:
            continue
        notes = [d for d, g in sample.expected.items() if g >= level]  # oldest first
        answer = _answer(ctx, i)
        if answer is None or answer.error is not None or not notes:
            out[i] = 0.0
            continue
        hit = [cites_support(answer.references, [n], ctx.texts) for n in notes]
        out[i] = float(hit[-1] and not any(hit[:-1])) if rule == "cite_newer" else float(all(hit))
    return out


def on_unanswerable(ctx: MetricContext, want_abstained: bool) -> np.ndarray:
    """abstention_accuracy (want_abstained) or hallucination_rate, on `answerable: false` samples only.

    An answer that could not be produced (`error`) scores the worst value of each, as a failed query does:
    0 abstention accuracy, 1 hallucination (a timed-out system must not look like one that abstained well).
    """

    out = np.full(len(ctx.gm), np.nan)
    for i, sample in enumerate(ctx.samples):
        if sample is not None and sample.answerable is False:
            answer = _answer(ctx, i)
            if answer is not None and answer.error is not None:
                out[i] = 0.0 if want_abstained else 1.0
                continue
            said = judged_abstention(answer, (ctx.judged or {}).get(ctx.gm.query_ids[i])) if ctx.judged else None
            if said == "not_judged" or said is None:
                said = abstained(answer)
            if isinstance(said, bool):
                out[i] = float(said == want_abstained)  # a failed judge verdict (a status) stays NaN
    return out


def negative_match(ctx: MetricContext) -> np.ndarray:
    """1 if the answer equals or contains a known-wrong answer, or could not be produced (`error`); NaN for
    samples without negative answers."""
    out = np.full(len(ctx.gm), np.nan)
    for i, sample in enumerate(ctx.samples):
        negatives = list(getattr(sample, "negative_answers", None) or []) if sample is not None else []
        if not negatives:
            continue
        answer = _answer(ctx, i)
        if answer is not None and answer.error is not None:
            out[i] = 1.0  # a failed answer is never a good one: the worst value of a lower-is-better metric
            continue
        text = _given_text(answer)
        out[i] = 0.0 if text is None else best(contains_reference, text, negatives)
    return out


def builtins() -> list[Builtin]:
    """These metrics as registry entries (the registry registers them at import)."""

    a = sys.modules[__name__]

    def answer(
        name: str,
        fn: Any,
        description: str,
        aliases: tuple[str, ...] = (),
        binary: bool = False,
        lower: bool = False,
        *,
        label: str = "",
        meaning: str = "",
    ) -> Builtin:
        return Builtin(
            name,
            "none",
            lambda c, k, lv, p: fn(c, lv),
            description,
            aliases,
            binary,
            answer_side=True,
            lower_is_better=lower,
            label=label,
            meaning=meaning,
            # a rate over samples ("share of ...") prints as a percentage, like recall
            unit="share" if meaning.startswith("share of") else "score",
        )

    def ref(name: str, fn: Any, description: str, aliases: tuple[str, ...] = (), *, meaning: str = "") -> Builtin:
        return answer(name, lambda c, lv: a.against_references(c, fn), description, aliases, meaning=meaning)

    return [
        ref(
            "exact_match",
            a.exact_match,
            "SQuAD exact match with the best reference answer",
            ("em",),
            meaning="share of answers identical to a reference answer (after SQuAD normalisation)",
        ),
        ref(
            "token_f1",
            a.token_f1,
            "SQuAD token F1 with the best reference answer",
            meaning="word overlap between the answer and the closest reference answer (1.0 = same words)",
        ),
        ref(
            "bleu",
            a.bleu,
            "sentence BLEU (sacrebleu) / 100, best reference",
            meaning="n-gram overlap of the answer with the closest reference answer (machine-translation style)",
        ),
        ref(
            "rouge1",
            a.rouge_metric("rouge1"),
            "ROUGE-1 F (rouge-score), best reference",
            meaning="single-word overlap of the answer with the closest reference answer",
        ),
        ref(
            "rouge2",
            a.rouge_metric("rouge2"),
            "ROUGE-2 F (rouge-score), best reference",
            meaning="word-pair overlap of the answer with the closest reference answer",
        ),
        ref(
            "rougeL",
            a.rouge_metric("rougeL"),
            "ROUGE-L F (rouge-score), best reference",
            meaning="longest run of words the answer shares, in order, with the closest reference answer",
        ),
        ref(
            "reference_containment",
            a.contains_reference,
            "1 if a reference answer occurs in the answer",
            meaning="share of answers that contain a reference answer word for word",
        ),
        answer(
            "attribution",
            a.attribution,
            "1 if the answer cites a gold support (answerable questions)",
            ("attribution_hit", "attribution_hit_rate"),
            binary=True,
            meaning="share of answers that cite at least one of the documents that support them",
        ),
        answer(
            "recency_conflict",
            a.recency_conflict,
            "1 if the citations follow the sample's recency_conflict_rule (conflicting notes)",
            binary=True,
            meaning="share of answers whose citations prefer the right note when notes conflict",
        ),
        answer(
            "abstention_accuracy",
            lambda c, lv: a.on_unanswerable(c, want_abstained=True),
            "1 if the system abstained (unanswerable questions only)",
            ("abstention",),
            meaning="share of unanswerable questions the system declined to answer",
        ),
        answer(
            "hallucination_rate",
            lambda c, lv: a.on_unanswerable(c, want_abstained=False),
            "1 if the system answered an unanswerable question (lower is better)",
            ("hallucination",),
            lower=True,
            meaning="share of unanswerable questions the system answered anyway (lower is better)",
        ),
        answer(
            "negative_match",
            lambda c, lv: a.negative_match(c),
            "1 if the answer contains a known-wrong answer (lower is better)",
            lower=True,
            meaning="share of answers that contain a known-wrong answer (lower is better)",
        ),
    ]
