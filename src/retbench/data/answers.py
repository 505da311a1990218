"""What a RAG system said beside its ranked list: the answer, what it cited, whether it abstained.

A `SystemAnswer` travels next to the Run (which holds only ranked ids): system outputs files,
the `http` adapter and a `generate:` block all produce `{query id: SystemAnswer}`, and the answer
metrics (`metrics/answers.py`) read it through `MetricContext.answers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from retbench.jsontypes import JSONObject


@dataclass(frozen=True)
class SystemAnswer:
    """One query's answer side.

    `text`: the generated answer (None: the system gave none); `references`: the ids (or anchors,
    `rel_path > heading > path`) the answer cites, in citation order; `abstained`: the system said it
    could not answer (None: it did not say); `latency`: seconds per stage (`retrieval`, `generation`, ...);
    `error`: the answer could not be produced (a generation call's status, e.g. `generation_timeout`): every
    answer metric that applies scores it 0, as a failed query scores 0 on retrieval metrics.
    """

    text: str | None = None
    references: tuple[str, ...] = ()
    abstained: bool | None = None
    latency: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> JSONObject:
        """The outputs-file form (fields left out when empty), which `io.answers.parse_answer` reads back."""
        out: JSONObject = {}
        if self.text is not None:
            out["answer"] = self.text
        if self.references:
            out["references"] = list(self.references)
        if self.abstained is not None:
            out["abstained"] = self.abstained
        if self.latency:
            out["latency"] = dict(self.latency)
        if self.error is not None:
            out["error"] = self.error
        return out


def abstained(answer: SystemAnswer | None) -> bool:
    """The one abstention rule: what the output says, else whether it gave no answer text."""
    if answer is not None and answer.abstained is not None:
        return answer.abstained
    return answer is None or not (answer.text or "").strip()


#: output fields that make up a SystemAnswer
ANSWER_FIELDS = ("answer", "references", "abstained", "latency", "error")
