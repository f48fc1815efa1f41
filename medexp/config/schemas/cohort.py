"""Schemas of the cohort detectors (conf/detector/mink_tail.yaml, topk_jaccard.yaml, loss.yaml): the
cell's model compared with reference models on the same examples."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, List

from medexp.config.ranges import at_least, percent, positive, probability
from medexp.config.schemas.detector import FREE_TEXT_FIELDS, DetectorBase


class RankBy(str, Enum):
    score = "score"  # the model's own per-example score
    delta = "delta"  # the score minus the median of the other cohort models on the same example


class OverlapNull(str, Enum):
    relabel = "relabel"  # cohort-relabel permutation of the target's largest overlap (calibrated on the cohort)
    hypergeometric = "hypergeometric"  # each top-K set a uniformly random K-set (the audit's test; liberal)


@dataclass
class CohortDetectorBase(DetectorBase):
    """A detector comparing the cell's model with reference models on the same examples."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    model_needs: ClassVar[str] = "token_scores"
    model_needs_reason: ClassVar[str] = "per-token Min-K%++ z values over the full vocabulary"
    # Model config names (conf/model/<name>.yaml) scored next to the cell's model; an entry
    # naming the cell's own model is skipped, so a model is never its own reference.
    cohort: List[str] = field(default_factory=list)
    n_permutations: int = at_least(10000, 1)  # cohort-relabel permutation test (p floor 1/(P+1))


@dataclass
class MinkTailConfig(CohortDetectorBase):
    """Min-K%++ cohort tail enrichment (Detector 3); defaults are the controlled audit's."""

    k_percent: float = percent(20.0)  # m_i = mean of the lowest K% (at least one) of the answer's z_t
    thresholds: List[float] = field(default_factory=lambda: [50.0, 100.0])  # report Pr[Delta > t]
    flag_threshold: float = 100.0
    flag_fraction: float = probability(0.05)  # flag when Pr[Delta > flag_threshold] > flag_fraction
    strata: List[str] = field(default_factory=lambda: ["answer_type", "content_type", "modality"])


@dataclass
class TopKJaccardConfig(CohortDetectorBase):
    """Cross-model top-K overlap of Min-K%++ scores (Detector 4)."""

    top_k: int = at_least(25, 1)
    k_percent: float = percent(20.0)
    rank_by: RankBy = RankBy.score
    flag_lift: float = positive(10.0)  # a pair is flagged when its overlap is >= this many times chance
    null: OverlapNull = OverlapNull.relabel  # what the cell's p-value tests against


@dataclass
class LossConfig(CohortDetectorBase):
    """Loss attack: per-example mean negative log-likelihood of the gold answer."""

    model_needs: ClassVar[str] = "scores"

    rank_by: RankBy = RankBy.score  # score: the target's own NLL; delta: its NLL gap to the cohort
    top_n: int = at_least(25, 1)  # examples shown as the top-ranked in the figure
