"""Schema of the paired semantic perturbation detector (conf/detector/perturbation_gap.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from medexp.config.ranges import at_least
from medexp.config.schemas.mmdetect import AnsweringDetectorBase


@dataclass
class PerturbationGapConfig(AnsweringDetectorBase):
    """Accuracy on each original item against its perturbed twin (the bench's ``twin:`` section)."""

    strata: List[str] = field(default_factory=lambda: ["category"])
    n_resamples: int = at_least(2000, 1)  # bootstrap of the gap, resampling pairs
    # Model configs (conf/model) of clean models asked the same pairs: the cell then tests its gap
    # minus their mean gap, since a twin set can be harder for every model.
    reference_models: List[str] = field(default_factory=list)
    n_permutations: int = at_least(10000, 1)  # the paired sign-flip test of that difference (p floor 1/(P+1))
