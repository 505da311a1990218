"""A run file evaluated as a system: for systems that cannot be called from here.

`path` is a TREC run (`qid Q0 doc rank score tag`) or system outputs in the golden-set contract
(JSONL of `{"id", "retrieved": [{"id", "text", "score"?}]}` or bare arrays of ids; a JSON/YAML mapping
id -> output), read by the project's own readers (`io.trec.read_run`, `io.outputs.read_outputs`).

The file answers by query id, not text: `search()` looks each query up. A query the file does not
answer is left out of the Run, so evaluation counts it as missing (scored 0 and reported), never as an
empty answer. Rankings are cut to the depth asked for, in trec_eval order. Latency is unknown and not
recorded. `index()` checks the file's document ids against the corpus: none in common is an input
error (ids from another corpus or id scheme); some unknown ones are counted in `describe()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retbench.data import Corpus, Queries, Run, RunBuilder
from retbench.errors import ConfigError, InputError
from retbench.io.outputs import read_outputs
from retbench.io.trec import read_run
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import Ranking, Retriever, register

FORMATS = ("auto", "trec", "outputs")
_OUTPUT_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".yaml", ".yml")


def _format_of(path: Path) -> str:
    return "outputs" if path.name.endswith(_OUTPUT_SUFFIXES) else "trec"


@register("runfile")
class RunFileRetriever(Retriever):
    """Replays a TREC run or a system-outputs file; see the module docstring."""

    adapter = "runfile"

    def __init__(self, path: str, format: str = "auto", name: str | None = None) -> None:
        super().__init__(name)
        if format not in FORMATS:
            raise ValueError(f"unknown run file format {format!r}; expected one of {', '.join(FORMATS)}")
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError("run file not found", path=self.path, field="params.path")
        self.format = _format_of(self.path) if format == "auto" else format
        self.texts: dict[str, str] = {}
        if self.format == "trec":
            self.run = read_run(self.path)
        else:
            outputs = read_outputs(self.path)
            self.run, self.texts = outputs.run, outputs.texts
        self.unknown_doc_ids = 0
        self.unanswered: list[str] = []

    def describe(self) -> JSONObject:
        return {
            "adapter": self.adapter,
            "path": str(self.path),
            "format": self.format,
            "queries_in_file": len(self.run),
            "unknown_doc_ids": self.unknown_doc_ids,
        }

    def fingerprint(self) -> str:
        import hashlib

        return hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]

    def index(self, corpus: Corpus) -> None:
        """Nothing to build; checks that the file's documents belong to this corpus."""
        docs = set(self.run.doc_ids.tolist())
        unknown = [d for d in docs if d not in corpus]
        if docs and len(unknown) == len(docs):
            raise InputError(
                f"none of the run file's {len(docs)} document ids is in the corpus (e.g. {sorted(docs)[0]!r}); wrong corpus or id scheme?",
                path=self.path,
            )
        self.unknown_doc_ids = len(unknown)

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        """The file's ranking of each query it answers, cut to k; status and errors as the file gives them."""
        builder = RunBuilder(self.name)
        for qid in queries:
            if qid not in self.run:
                self.unanswered.append(qid)
                continue
            builder.add(qid, self.run.ranking(qid)[:k], status=self.run.status[qid], error=self.run.errors.get(qid))
        return builder.build()

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        raise InputError(f"run file {self.path} answers query ids, not query texts: use search(queries, k)")
