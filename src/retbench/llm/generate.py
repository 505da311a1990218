"""A system's `generate:` block: answers from a chat model over the system's own top retrieved chunks.

    systems:
      - name: bm25
        adapter: bm25s
        generate:
          llm: {local: {model_file: .retbench-cache/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}}
          prompt: answer_v1        # a versioned template in llm/prompts (or your own <name>_v<N>.txt)
          context_k: 3             # how many retrieved chunks go into the context, rank order
          abstain: "I cannot answer from the context."

The generator holds everything but the retriever fixed, so two retrievers are compared by the answers
they lead to. Calls go through the judge's machinery (`llm/judge.py`): `llm` is a `judge:` block
(any OpenAI-compatible endpoint, or a loopback tinyq4 on a GGUF file), answers are cached by the
exact messages sent and every call is logged to `generate_calls.jsonl` beside the system's results.

The context numbers the chunks `[1] text`, `[2] text`, ...; citations `[n]` in the answer become the
references (the chunk ids); the answer is an abstention when, normalized, it starts with the
`abstain` text. A failed call leaves the query with an `error` answer (`generation_error` or
`generation_timeout`: the generator failed, not a judge; scored 0), never a made-up one; a stream cut
before its end is such a failure, never a shorter answer.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from retbench.config.experiment import GenerateBlock
from retbench.data import Corpus, Queries, Run
from retbench.data.answers import SystemAnswer
from retbench.errors import ConfigError
from retbench.jsontypes import JSONObject
from retbench.llm.prompts import load_prompt
from retbench.retrievers.base import Ranking, Retriever

if TYPE_CHECKING:
    from retbench.llm.judge import Judge

_CITE = re.compile(r"\[(\d{1,3})\]")


def describe_generate(spec: GenerateBlock) -> JSONObject:
    """What a system's answers depend on besides its retriever (part of the system's manifest)."""
    return {
        "llm": spec.llm.with_(prompt=spec.prompt).to_manifest(),
        "prompt": load_prompt(spec.prompt).describe(),
        "context_k": spec.context_k,
        "abstain": spec.abstain,
        "max_chars": spec.max_chars,
    }


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def read_answer(text: str, context_ids: Sequence[str], abstain: str) -> SystemAnswer:
    """A model's reply -> SystemAnswer: citations [n] -> chunk ids, the abstain text -> abstained."""
    cited = []
    for m in _CITE.finditer(text):
        n = int(m[1])
        if 1 <= n <= len(context_ids) and context_ids[n - 1] not in cited:
            cited.append(context_ids[n - 1])
    return SystemAnswer(text.strip(), tuple(cited), _norm(text).startswith(_norm(abstain)))


def numbered(texts: Callable[[str], str], ids: Sequence[str], max_chars: int) -> str:
    """The context a model sees: `[1] text`, `[2] text`, ... (each chunk cut to max_chars)."""
    return "\n\n".join(f"[{n}] {texts(d)[:max_chars]}" for n, d in enumerate(ids, 1)) or "(no passages)"


class Generator:
    """Answers each query from its top `context_k` chunks through one pinned chat model."""

    def __init__(self, spec: GenerateBlock, *, log_path: Path | None = None, cache_dir: Path | None = None) -> None:
        self.spec = spec
        self.llm = spec.llm.with_(prompt=spec.prompt)  # the pinned model, asked with the answer prompt
        self.log_path, self.cache_dir = log_path, cache_dir
        self._stack = ExitStack()
        self._judge: Judge | None = None

    def _open(self) -> Judge:
        """The judge-machinery client, its server started on first use (a local model) and kept until close()."""
        if self._judge is None:
            from retbench.llm.judge import Judge, open_base_url

            url = self._stack.enter_context(open_base_url(self.llm))
            self._judge = Judge(
                self.llm,
                self.spec.prompt,
                base_url=url,
                log_path=self.log_path,
                cache_dir=self.cache_dir,
                parse=lambda text: (text, "ok"),
                failure="generation",
            )
        return self._judge

    def answer(
        self, queries: Mapping[str, str], rankings: Mapping[str, Ranking], corpus: Corpus
    ) -> dict[str, SystemAnswer]:
        """{query id: SystemAnswer} for every query; generation seconds go into each answer's latency."""
        items, contexts = [], {}
        for qid, question in queries.items():
            ids = [d for d, _ in rankings.get(qid, [])[: self.spec.context_k] if d in corpus]
            contexts[qid] = ids
            context = numbered(lambda d: corpus.joined(corpus.index[d]), ids, self.spec.max_chars)
            items.append((qid, {"context": context, "question": question, "abstain": self.spec.abstain}))
        if not items:
            return {}
        judge = self._open()
        t0 = time.perf_counter()
        verdicts = judge.judge(items)
        each = (time.perf_counter() - t0) / len(items)
        out = {}
        for v in verdicts:
            if v.ok:
                a = read_answer(v.raw, contexts[v.key], self.spec.abstain)
                out[v.key] = SystemAnswer(a.text, a.references, a.abstained, {"generation": 0.0 if v.cached else each})
            else:
                out[v.key] = SystemAnswer(error=v.status, latency={"generation": each})
        return out

    def manifest(self) -> JSONObject:
        return self._judge.manifest() if self._judge is not None else {}

    def close(self) -> None:
        self._stack.close()
        self._judge = None


class GeneratingRetriever(Retriever):
    """A retriever whose search also answers each query with a `Generator`; answers land in `self.answers`."""

    inner: Retriever  # always a wrapper

    def __init__(self, inner: Retriever, generator: Generator) -> None:
        super().__init__(inner.name)
        self.inner, self.generator = inner, generator
        self.adapter = inner.adapter
        self.capabilities = inner.capabilities - {"async"}
        self.components = [inner]  # encoders_of() finds the inner retriever's encoder
        self.answers: dict[str, SystemAnswer] = {}
        self.corpus: Corpus | None = None

    def describe(self) -> JSONObject:
        return {**self.inner.describe(), "generate": describe_generate(self.generator.spec)}

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def index(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.inner.index(corpus)

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        """The inner search, then one answer per answered query from its top chunks."""
        run = self.inner.search(queries, k, batch_size=batch_size)
        if self.corpus is None:
            raise ConfigError("a generate block needs the corpus: index() before search()", field="generate")
        asked = {q: queries[q] for q in run.query_ids if not run.status[q].failed}
        rankings = {q: run.ranking(q) for q in asked}
        for qid, answer in self.generator.answer(asked, rankings, self.corpus).items():
            retrieval = run.latency.get(qid)
            stages = {**({"retrieval": retrieval} if retrieval is not None else {}), **answer.latency}
            self.answers[qid] = SystemAnswer(answer.text, answer.references, answer.abstained, stages, answer.error)
        return run

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return self.inner.search_batch(texts, k)

    def save(self, path: str | Path) -> None:
        self.inner.save(path)

    def load(self, path: str | Path) -> None:
        self.inner.load(path)

    def close(self) -> None:
        try:
            self.generator.close()
        finally:
            close = getattr(self.inner, "close", None)
            if callable(close):
                close()
