"""The judging stage: the judge's verdicts each judged answer metric needs, per (system, query), stored.

    judge:                       # any OpenAI-compatible chat endpoint (llm/settings.py), or a local GGUF
      local: {model_file: .retbench-cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
      max_tokens: 160
    judging:                     # optional; these are the defaults
      context_k: 3               # the top k retrieved chunks are the context that is judged
      questions: 3               # answer relevance: questions generated per answer
      max_chars: 600             # of each chunk in a prompt
      prompts: {groundedness: groundedness_v1}   # a kind -> another versioned template
      encoder: {}                # answer relevance's embedding model (default: the packaged MiniLM)

After a system's answers are saved, and only for the judged metrics the experiment asks for, the
stage asks the judge (through `llm/judge.py`: pinned identity, cache, call log) for:

- `answer_claims` / `answer_support` (faithfulness): the statements of the answer (`claims_v1`),
  then one verdict per statement against the context (`support_v1`);
- `reference_claims` / `reference_support` (context recall): the same for the first reference answer;
- `chunks` (context precision): one relevance verdict per context chunk (`context_relevance_v1`);
- `questions` (answer relevance): N questions from the answer (`questions_v1`), with their cosines to
  the original question under the encoder;
- `groundedness` (`groundedness_v1`), `correctness` (`correctness_v1`) and `abstention`
  (`abstention_v1`, only for unanswerable questions whose output has no `abstained` field).

Each verdict is stored as `{"status", "value", "prompt"}` in `systems/<name>/judged.json` with the
judge's identity per prompt; every call is logged to `judge_calls.jsonl` beside it. A re-run, or a
run resumed after a crash, asks the cache first and makes no call for a verdict it already has.
The metrics themselves (metrics/judged.py) are pure functions of these stored verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import numpy as np

from retbench.config.experiment import JudgingBlock
from retbench.data import Corpus, Run
from retbench.data.answers import SystemAnswer
from retbench.data.corpus import Sample
from retbench.errors import ConfigError
from retbench.io.files import write_json
from retbench.llm import verdicts as vp
from retbench.llm.generate import numbered
from retbench.llm.prompts import load_prompt
from retbench.llm.settings import JudgeSettings
from retbench.metrics.judged import JUDGED_METRICS, counts, given_text, outcomes, references
from retbench.metrics.rubric import Rubric, rubric_of
from retbench.results.blocks import JudgeBlock, JudgedCount, JudgeStats
from retbench.studies.rubrics import Item, deepest, rubric_identity, rubric_items

if TYPE_CHECKING:  # both load on first use (a study without an LLM stage never imports them)
    from retbench.evaluation import Evaluation
    from retbench.llm.judge import Judge
    from retbench.retrievers.encoders.encoder import Encoder

#: judge prompt kind -> the shipped template
PROMPTS = {
    "claims": "claims_v1",
    "support": "support_v1",
    "context_relevance": "context_relevance_v1",
    "questions": "questions_v1",
    "groundedness": "groundedness_v1",
    "correctness": "correctness_v1",
    "abstention": "abstention_v1",
}
PARSERS: dict[str, Callable[[str], tuple[object, str]]] = {
    "claims": partial(vp.parse_strings, key="statements"),
    "support": partial(vp.parse_flags, key="verdicts"),
    "context_relevance": partial(vp.parse_flag, key="relevant"),
    "questions": partial(vp.parse_strings, key="questions", allow_empty=False),
    "groundedness": partial(vp.parse_scored, lists=("supported_claims", "unsupported_claims")),
    "correctness": partial(vp.parse_scored, strings=("reasoning",)),
    "abstention": partial(vp.parse_flag, key="abstained"),
}
#: metric -> the prompt kinds it needs
NEEDS = {
    "faithfulness": ("claims", "support"),
    "context_recall": ("claims", "support"),
    "context_precision": ("context_relevance",),
    "answer_relevance": ("questions",),
    "groundedness": ("groundedness",),
    "correctness": ("correctness",),
    "abstention_accuracy": ("abstention",),
    "hallucination_rate": ("abstention",),
}
JUDGED_FILE = "judged.json"
CALLS_FILE = "judge_calls.jsonl"


def prompt_of(judging: JudgingBlock, kind: str) -> str:
    """The template a prompt kind uses: the `judging.prompts` entry, else the shipped one."""
    return str(judging.prompts.get(kind, PROMPTS[kind]))  # type: ignore[call-overload]


def check_judging(judging: JudgingBlock, source: str) -> None:
    """Every template `judging.prompts` names exists (checked when the config is read); the error names its field."""
    for kind, pid in judging.prompts.items():
        try:
            load_prompt(str(pid))
        except ConfigError as exc:
            raise ConfigError(exc.reason, path=source, field=f"judging.prompts.{kind}") from None


def judging_identity(
    judge: JudgeSettings | None, judging: JudgingBlock, rubrics: Sequence[tuple[Rubric, JudgeSettings | None]] = ()
) -> dict[str, object]:
    """What the verdicts depend on (part of a cell's config hash and of its manifest); the asked rubrics'
    definitions among them, so an edited rubric re-scores. `judge` is None when only rubrics with their own
    judge are asked (the experiment has no judge of its own)."""
    return {
        **({"rubrics": rubric_identity(rubrics)} if rubrics else {}),
        "judge": judge.to_manifest() if judge is not None else None,
        "context_k": judging.context_k,
        "questions": judging.questions,
        "max_chars": judging.max_chars,
        "prompts": {k: load_prompt(prompt_of(judging, k)).describe() for k in sorted(PROMPTS)},
        "encoder": dict(judging.encoder.options),
    }


def judged_metrics(metrics: Sequence[str]) -> list[str]:
    """The asked metrics that need the judge (abstention metrics only use it when an output does not say)."""
    return [m for m in metrics if m in NEEDS or rubric_of(m) is not None]


def stage_metrics(
    judge: JudgeSettings | None, metrics: Sequence[str], rubrics: Sequence[tuple[Rubric, JudgeSettings | None]]
) -> list[str]:
    """The asked metrics the judging stage can judge: every judged one with the experiment's judge, else only
    the rubrics that bring their own (config validation refuses any other judged metric without a judge)."""
    own = {r.name for r, settings in rubrics if settings is not None}
    return [m for m in judged_metrics(metrics) if judge is not None or m in own]


def needs_judge(metrics: Sequence[str]) -> bool:
    """Metrics that cannot be computed without a judge block."""
    return any(m in JUDGED_METRICS for m in metrics)


class JudgeServer:
    """The judge's base URL, a local model server started on first use and kept for the whole experiment."""

    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings
        self._stack = ExitStack()
        self._url: str | None = None

    def url(self) -> str:
        if self._url is None:
            from retbench.llm.judge import open_base_url

            self._url = self._stack.enter_context(open_base_url(self.settings))
        return self._url

    def close(self) -> None:
        self._stack.close()
        self._url = None


# -- the stage -----------------------------------------------------------------------------------------
#: a verdict's post-processing (answer relevance: the generated questions' cosines): (key, value) -> (value, status)
_Post = Callable[[tuple[str, ...], object], tuple[object, str]]


class Judging:
    """Judges one system's answers and contexts; `run()` returns {query id: records} and writes them."""

    def __init__(
        self,
        judge: JudgeSettings | None,
        judging: JudgingBlock,
        server: JudgeServer | None,
        sysdir: Path,
        cache_dir: Path | None = None,
        rubrics: Sequence[tuple[Rubric, JudgeSettings | None]] = (),
    ) -> None:
        self.judge, self.judging = judge, judging
        self.server, self.sysdir, self.cache_dir = server, sysdir, cache_dir
        self.rubrics = list(rubrics)
        self.judges: dict[str, Judge] = {}
        self._enc: Encoder | None = None

    def _judge(self, kind: str) -> Judge:
        if kind not in self.judges:
            from retbench.llm.judge import Judge

            if self.judge is None or self.server is None:  # `stage_metrics` leaves only own-judged rubrics
                raise ConfigError(f"the {kind} verdicts need the experiment's judge: block", field="judge")
            self.judges[kind] = Judge(
                self.judge,
                prompt_of(self.judging, kind),
                base_url=self.server.url(),
                log_path=self.sysdir / CALLS_FILE,
                cache_dir=self.cache_dir,
                parse=PARSERS[kind],
            )
        return self.judges[kind]

    def _ask(self, kind: str, items: list[Item], records: dict[str, dict[str, Any]], post: _Post | None = None) -> None:
        """Judge `items` (keys (qid, record name[, rank])) with one prompt kind and store each verdict."""
        if not items:
            return
        judge = self._judge(kind)
        for v in judge.judge(items):
            qid, name = v.key[0], v.key[1]
            value, status = (v.value, v.status) if post is None or not v.ok else post(v.key, v.value)
            rec = {"status": status, "value": value if status == "ok" else None, "prompt": judge.prompt.id}
            if v.expected is not None and status == "ok":  # from token probabilities: calibration's AUC reads it
                rec["expected"] = v.expected
            if len(v.key) > 2:
                records[qid].setdefault(name, []).append({"doc": v.key[2], **rec})
            else:
                records[qid][name] = rec

    def run(
        self,
        metrics: Sequence[str],
        questions: Mapping[str, str],
        samples: Mapping[str, Sample],
        answers: Mapping[str, SystemAnswer],
        contexts: Mapping[str, Sequence[str]],
        texts: Callable[[str], str],
    ) -> dict[str, dict[str, Any]]:
        """Verdicts for every query in `questions`: `contexts` are its top chunks' ids (at least `context_k`,
        as many as a rubric shows), `texts` their text."""
        want = set(stage_metrics(self.judge, metrics, self.rubrics))
        cut, top = self.judging.max_chars, self.judging.context_k
        records: dict[str, dict[str, Any]] = {q: {"context": list(contexts.get(q, ()))[:top]} for q in questions}
        context = {q: numbered(texts, records[q]["context"], cut) for q in questions}
        plan = first_round(want, questions, samples, answers, records, texts, cut, self.judging.questions)
        for kind, items in plan.items():
            post = partial(self._cosines, questions) if kind == "questions" else None
            self._ask(kind, items, records, post)
        support = []
        for q in questions:
            for name, target in (("answer_claims", "answer_support"), ("reference_claims", "reference_support")):
                claims = records[q].get(name, {})
                if claims.get("status") == "ok" and claims["value"] and records[q]["context"]:
                    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(claims["value"], 1))
                    support.append(((q, target, len(claims["value"])), {"context": context[q], "statements": listed}))
        self._ask("support", [((k[0], k[1]), f) for k, f in support], records)
        for (q, target, n), _ in support:  # a verdict list of the wrong length is not a verdict
            rec = records[q][target]
            if rec["status"] == "ok" and len(rec["value"]) != n:
                rec.update(status="unparseable", value=None)
        self._rubrics(want, questions, samples, answers, contexts, texts, records)
        write_json(
            self.sysdir / JUDGED_FILE,
            {
                "judging": judging_identity(self.judge, self.judging, self.rubrics),
                **self.manifest(),
                "verdicts": records,
            },
        )
        return records

    def _rubrics(
        self,
        want: set[str],
        questions: Mapping[str, str],
        samples: Mapping[str, Sample],
        answers: Mapping[str, SystemAnswer],
        ranked: Mapping[str, Sequence[str]],
        texts: Callable[[str], str],
        records: dict[str, dict[str, Any]],
    ) -> None:
        """Each asked rubric metric's verdicts (studies/rubrics.py), through its own judge (own server if any)."""
        from retbench.llm.judge import Judge
        from retbench.llm.rubric import parser, rubric_prompt

        with ExitStack() as stack:
            for rubric, own in self.rubrics:
                if rubric.name not in want:
                    continue
                j = self.judging
                items = rubric_items(rubric, j.context_k, j.max_chars, questions, samples, answers, ranked, texts)
                if not items:
                    continue
                server, settings = self.server, own or self.judge
                if own is not None:
                    server = JudgeServer(own)
                    stack.callback(server.close)
                if server is None or settings is None:  # `stage_metrics` asks only own-judged rubrics then
                    continue
                self.judges[rubric.record] = Judge(
                    settings,
                    rubric_prompt(rubric),
                    base_url=server.url(),
                    log_path=self.sysdir / CALLS_FILE,
                    cache_dir=self.cache_dir,
                    parse=parser(rubric),
                    grades=rubric.grades,
                )
                self._ask(rubric.record, items, records)

    def _cosines(self, questions: Mapping[str, str], key: tuple[str, ...], generated: list[str]) -> tuple[object, str]:
        """Answer relevance's verdict: the generated questions and their cosines with the original one."""
        vecs = self._encoder().encode_queries([questions[key[0]], *generated])
        vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        cos = (vecs[1:] @ vecs[0]).astype(float)
        return {"questions": generated, "cosines": [round(float(c), 6) for c in cos]}, "ok"

    def _encoder(self) -> Encoder:
        if self._enc is None:
            from retbench.retrievers.encoders.encoder import Encoder

            self._enc = Encoder(**self.judging.encoder.options)
        return self._enc

    def manifest(self) -> dict[str, Any]:
        """Each prompt kind's judge identity, and what the stage spent (calls, tokens, cost) in total."""
        judges = self.judges
        stats = [cast(JudgeStats, j.stats.to_dict(j.settings)) for j in judges.values()]  # its to_dict writes one
        statuses: dict[str, int] = {}
        for s in stats:
            for st, c in s["statuses"].items():
                statuses[st] = statuses.get(st, 0) + c
        total: JudgeStats = {
            "calls": sum(int(s["calls"]) for s in stats),
            "cached": sum(int(s["cached"]) for s in stats),
            "input_tokens": sum(int(s["input_tokens"]) for s in stats),
            "output_tokens": sum(int(s["output_tokens"]) for s in stats),
            "retries": sum(int(s["retries"]) for s in stats),
            "cost": round(sum(s["cost"] for s in stats), 6),
            "tokens_estimated": any(s["tokens_estimated"] for s in stats),
            "statuses": statuses,
            "flagged": sum(int(s.get("flagged", 0)) for s in stats),
            "keyed_on": sorted({j.identity.keyed_on for j in judges.values()}),
        }
        return {"identity": {k: j.identity.to_dict() for k, j in judges.items()}, "stats": total}


@dataclass(frozen=True)
class Judged:
    """The judging stage's result for one system: stored verdicts by query, and the stage's manifest
    (each prompt kind's judge identity, what the calls cost)."""

    records: dict[str, dict[str, Any]]
    manifest: dict[str, Any]


@dataclass
class JudgeStage:
    """The judging stage of one cell: the verdicts its judged answer metrics need, for its run and answers."""

    judge: JudgeSettings | None
    judging: JudgingBlock
    server: JudgeServer | None
    sysdir: Path
    rubrics: Sequence[tuple[Rubric, JudgeSettings | None]] = ()

    def __call__(
        self,
        metrics: Sequence[str],
        run: Run,
        queries: Mapping[str, str],
        samples: Mapping[str, Sample],
        answers: Mapping[str, SystemAnswer],
        corpus: Corpus,
    ) -> Judged:
        """Judge the top `context_k` retrieved chunks of every query (none for a failed query) and its answer."""
        k = deepest(self.rubrics, self.judging.context_k)
        contexts = {
            q: [str(d) for d in run.docs(q)[:k] if str(d) in corpus] if q in run and not run.status[q].failed else []
            for q in queries
        }
        stage = Judging(self.judge, self.judging, self.server, self.sysdir, rubrics=self.rubrics)
        records = stage.run(metrics, queries, samples, answers, contexts, lambda d: corpus.joined(corpus.index[d]))
        return Judged(records, stage.manifest())


def judged_summary(
    ev: Evaluation,
    manifest: Mapping[str, Any],
    samples: Mapping[str, Sample],
    answers: Mapping[str, SystemAnswer] | None,
    records: Mapping[str, Any],
) -> JudgeBlock:
    """A cell summary's `judge` block: calls, tokens and cost spent, and "judged N of M" per judged metric."""

    rows = [samples.get(q) for q in ev.query_ids]
    per_metric = {
        m: _judged_count(counts(outcomes(m, rows, answers, records, ev.query_ids)))
        for m in ev.metrics
        if m in JUDGED_METRICS
    }
    stats: JudgeStats = manifest.get("stats", {})
    return {**stats, "metrics": per_metric}


def _judged_count(c: Mapping[str, Any]) -> JudgedCount:
    """`metrics.judged.counts`'s entry as its typed shape (metrics sits below results and cannot name it)."""
    return {"judged": int(c["judged"]), "of": int(c["of"]), "statuses": dict(c["statuses"])}


def first_round(
    want: set[str],
    questions: Mapping[str, str],
    samples: Mapping[str, Sample],
    answers: Mapping[str, SystemAnswer],
    records: Mapping[str, dict[str, Any]],
    texts: Callable[[str], str],
    max_chars: int,
    n_questions: int,
) -> dict[str, list[Item]]:
    """Every verdict that needs no earlier verdict, by prompt kind; only where the metric applies."""
    plan: dict[str, list[Item]] = {k: [] for k in PROMPTS}
    for q, question in questions.items():
        sample, answer, ctx = samples.get(q), answers.get(q), records[q]["context"]
        text, refs = given_text(answer), references(sample)
        joined = numbered(texts, ctx, max_chars)
        if text is not None:
            if "faithfulness" in want:
                plan["claims"].append(((q, "answer_claims"), {"question": question, "text": text}))
            if "answer_relevance" in want:
                plan["questions"].append(((q, "questions"), {"answer": text, "n": str(n_questions)}))
            if "groundedness" in want:
                fields = {"context": joined, "question": question, "answer": text}
                plan["groundedness"].append(((q, "groundedness"), fields))
            if "correctness" in want and refs:
                fields = {"question": question, "references": "\n".join(f"- {r}" for r in refs), "answer": text}
                plan["correctness"].append(((q, "correctness"), fields))
        if "context_recall" in want and refs and ctx:
            plan["claims"].append(((q, "reference_claims"), {"question": question, "text": refs[0]}))
        if "context_precision" in want and ctx and (sample is None or sample.answerable is not False):
            for d in ctx:
                fields = {"question": question, "passage": texts(d)[:max_chars]}
                plan["context_relevance"].append(((q, "chunks", d), fields))
        if want & {"abstention_accuracy", "hallucination_rate"} and _classify_abstention(answer, sample):
            plan["abstention"].append(((q, "abstention"), {"question": question, "answer": str(answer.text)}))
    return plan


def _classify_abstention(answer: SystemAnswer | None, sample: Sample | None) -> TypeGuard[SystemAnswer]:
    """An unanswerable question whose output gave text but did not say whether it abstained."""
    return (
        sample is not None
        and sample.answerable is False
        and answer is not None
        and answer.abstained is None
        and answer.error is None
        and bool((answer.text or "").strip())
    )
