"""The base of every detector schema (conf/detector/); each family's schemas sit in its own module
(exchangeability, cohort, composition, memorization, images, mmdetect, medvigil, perturbation,
dataset_tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from omegaconf import MISSING

from medexp.config.ranges import probability


# The example fields a detector reads (medexp.benchmarks.skips): a benchmark row whose other
# fields are unusable (an empty answer, options with a gap) is kept for it, not skipped.
QUESTION_FIELDS = ("question", "answer", "options")  # answering a question, options included
FREE_TEXT_FIELDS = ("question", "answer")  # scoring the gold answer as text: no options


# What a detector reads from its models (medexp.models.records): "scores" (one teacher-forced
# score per example: a record of scores made elsewhere serves), "token_scores" (per-token values),
# "model" (the model itself: it scores new text or answers probes).
MODEL_NEEDS = ("scores", "token_scores", "model")


@dataclass
class DetectorBase:
    example_fields: ClassVar[tuple[str, ...]] = QUESTION_FIELDS
    model_needs: ClassVar[str] = "model"
    model_needs_reason: ClassVar[str] = "the model itself (it scores new text or answers probes)"
    name: str = MISSING
    family: str = MISSING  # the multiple-testing family the cell's p-value belongs to
    alpha: float = probability(0.01)  # flag when p_value < alpha
