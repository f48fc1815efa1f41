"""A toy detector added the way docs/architecture.md says a detector is added, in the test tree
only: a schema, a pure detector, an evaluator, and the declaration naming them. Its test: do
earlier examples of the release score higher (one-sided Spearman test of release position against
the per-example score)?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd
from scipy import stats

from medexp.config.schemas import ControlKind, DetectorBase
from medexp.config.schemas.detector import FREE_TEXT_FIELDS
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import DetectorDeclaration, Input
from medexp.stats.detector_power import SPEARMAN, PowerFormula, detector_mde


@dataclass
class ToyConfig(DetectorBase):
    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    model_needs: ClassVar[str] = "scores"
    model_needs_reason: ClassVar[str] = "per-example scores"
    alpha: float = 0.05


def toy_detector(example_scores: pd.DataFrame, cfg) -> DetectorResult:
    """Pure: the scores in release order (``position``) -> a one-sided Spearman test that rho < 0."""
    table = example_scores.sort_values("position")
    test = stats.spearmanr(table["position"], table["mean_logprob"], alternative="less")
    metrics = {"p_value": float(test.pvalue), "statistic": float(test.statistic), "n_examples": float(len(table)),
               "flag": float(test.pvalue < cfg.alpha), "mde": detector_mde(DECLARATION.power, len(table), cfg.alpha)}
    return DetectorResult(metrics, table[["example_id", "position", "mean_logprob"]], "per_example")


def toy_evaluator(ctx) -> DetectorResult:
    """The evaluator: fetch what the detector reads (the cell model's per-example scores), call it."""
    return toy_detector(ctx.example_scores(), ctx.cfg.detector)


DECLARATION = DetectorDeclaration(
    name="toy",
    schema=ToyConfig,
    evaluator="tests.detectors.toy:toy_evaluator",
    inputs=frozenset({Input.scores}),
    controls=frozenset({ControlKind.none, ControlKind.order_hash}),
    power=PowerFormula(SPEARMAN, "one", "examples", "Spearman rho (position vs score)",
                       "one-sided Spearman test: earlier examples score higher"),
    power_count="medexp.evaluators.power_counts:examples",
    docs="docs/architecture.md",
)
