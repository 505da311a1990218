"""The judge-calibration config model (`retbench judge-calibrate`): how far can the judge be trusted?"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from retbench.config.base import Block, NonNegativeInt, PositiveInt, field_error
from retbench.config.common import FolderName
from retbench.config.judge import JudgeSettings
from retbench.config.study import Study


class Sample(Block):
    """The stratified sample of human-judged pairs the judge grades."""

    relevant: NonNegativeInt = Field(10, description="pairs the human qrels judge relevant")
    nonrelevant: NonNegativeInt = Field(10, description="pairs judged (or taken as) not relevant")
    nonrelevant_depth: NonNegativeInt = Field(10, description="BM25's unjudged top documents stand in for them")
    seed: NonNegativeInt = 0


class RankingSystem(Block):
    name: FolderName
    adapter: str = "bm25s"
    params: dict[str, Any] = Field(default_factory=dict)


class Ranking(Block):
    """Kendall's tau between the systems' orders under human and under LLM labels."""

    queries: PositiveInt = 5
    depth: PositiveInt = 5
    systems: list[RankingSystem] = Field(min_length=2)


class RubricCalibration(Block):
    """Rubric metrics' stored verdicts (an experiment's results) against the human verdicts of the golden set
    (`metadata.human: {metric: value}` on its samples); `dataset` is that golden set."""

    results: str = Field(description="the experiment's results folder")
    system: str = Field(description="the system whose answers were judged (its results key)")
    metrics: list[str] = Field(min_length=1, description="rubric metrics to calibrate")


class CalibrationModel(Study):
    """A calibration of the judge against human labels."""

    name: str = "judge-calibration"
    dataset: str = Field("scifact", description="a shipped name or a BEIR folder")
    split: str = "test"
    output: str | None = Field(None, description="default: results/<name>")
    judge: JudgeSettings | None = Field(None, description="required unless `rubrics` is given")
    rubrics: RubricCalibration | None = Field(None, description="calibrate rubric metrics instead of relevance")
    sample: Sample = Field(default_factory=Sample)
    relevant_from: NonNegativeInt = Field(2, description="the lowest LLM grade that counts as relevant")
    bootstrap: NonNegativeInt = 1000
    spot_check: NonNegativeInt = Field(5, description="pairs re-judged with judge.check_prompt")
    max_chars: NonNegativeInt = Field(1200, description="passages are cut here")
    ranking: Ranking | None = None

    @model_validator(mode="after")
    def _judge_or_rubrics(self) -> CalibrationModel:
        if self.judge is None and self.rubrics is None:
            raise field_error("judge", "a relevance calibration needs a judge: block (or give rubrics:)")
        return self

    @property
    def relevance_judge(self) -> JudgeSettings:
        """The judge of a relevance calibration (validated present when `rubrics` is absent)."""
        if self.judge is None:
            raise field_error("judge", "a relevance calibration needs a judge: block")
        return self.judge
