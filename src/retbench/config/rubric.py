"""The `rubrics:` config block: judged metrics people define (metrics/rubric.py says what each field means).

    metrics: [recall@5, answer_match, tone, completeness]
    rubrics:
      - name: tone
        rubric: "Is the answer polite and professional, without talking down to the user?"
        scale: bool                        # the judge answers 1 (yes) / 0 (no): the metric is the share of yes
        inputs: [query, answer]
      - name: completeness
        rubric: "Does the answer cover every point of the reference answer?"
        steps: ["List the reference's points.", "Check each against the answer."]
        scale: 0..3                        # or 3: the integers 0 to 3
        levels: {0: misses every point, 3: covers every point}
        inputs: [query, answer, references, passages]
        k: 2                               # passages shown (default: judging.context_k)
        judge: {base_url: "http://127.0.0.1:8080"}   # optional: its own judge (default: the experiment's;
                                                     # with one, the experiment needs no judge: for it)

Each rubric is declared as a metric when the config is validated, so `metrics:` (declared after it) can
name it; a name that is another metric's, or a shipped rubric's with another definition, is an error
naming the rubric's field.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator

from retbench.config.base import Block, PositiveInt, field_error
from retbench.config.judge import JudgeSettings
from retbench.errors import ConfigError
from retbench.metrics.catalog import register
from retbench.metrics.registry import lookup
from retbench.metrics.rubric import INPUTS, MAX_HIGH, Rubric, declare

InputName = Literal["query", "answer", "references", "passages", "negatives"]


def _scale(raw: object) -> object:
    """`bool`; `0..N` or N -> N, with N from 1 to MAX_HIGH; anything else one clear error."""
    if raw == "bool":
        return raw
    high = raw
    if isinstance(raw, str) and (m := re.fullmatch(r"\s*0\s*\.\.\s*(\d+)\s*", raw)):
        high = int(m[1])
    if isinstance(high, bool) or not isinstance(high, int) or not 1 <= high <= MAX_HIGH:
        raise ValueError(f"must be bool, or 0..N with N from 1 to {MAX_HIGH} (got {raw!r})")
    return high


Scale = Annotated[Literal["bool"] | int, BeforeValidator(_scale, json_schema_input_type=str | int)]


def _default_inputs() -> list[InputName]:
    return ["query", "answer"]


class RubricBlock(Block):
    """One judged metric defined by its rubric."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z][\w\-]*$", description="the metric's name in metrics:")]
    rubric: str = Field(min_length=1, description="the criterion, in your words")
    steps: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="evaluation steps the judge follows"
    )
    scale: Scale = Field("bool", description=f"bool (1 yes / 0 no), or 0..N (N from 1 to {MAX_HIGH})")
    levels: dict[int, str] = Field(default_factory=dict, description="grade -> what it means")
    inputs: list[InputName] = Field(
        default_factory=_default_inputs, min_length=1, description=f"what the judge sees: {INPUTS}"
    )
    k: PositiveInt | None = Field(None, description="passages shown (default: judging.context_k)")
    judge: JudgeSettings | None = Field(
        None,
        description="its own judge instead of the experiment's judge: (then the experiment needs none for this metric)",
    )

    @field_validator("inputs")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("each input at most once")
        return v

    def to_rubric(self) -> Rubric:
        return Rubric(
            self.name,
            self.rubric,
            tuple(self.inputs),
            None if self.scale == "bool" else int(self.scale),
            dict(self.levels),
            tuple(self.steps),
            self.k,
        )


def _declared(blocks: list[RubricBlock]) -> list[RubricBlock]:
    """Declare each rubric as a metric (so `metrics:` can name it); an error names the rubric's field."""
    names = [b.name for b in blocks]
    for i, b in enumerate(blocks):
        if names.index(b.name) != i:
            raise field_error(f"[{i}].name", f"rubric {b.name!r} is declared twice")
        try:
            register(declare(b.to_rubric(), lookup(b.name) is not None), replace=True)  # type: ignore[arg-type]
        except ConfigError as exc:
            raise field_error(f"[{i}].{exc.field or 'name'}", exc.reason) from None
    return blocks


Rubrics = Annotated[list[RubricBlock], AfterValidator(_declared)]
