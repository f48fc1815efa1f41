"""Schema of the overlap-gap detector (conf/detector/overlap_gap.yaml): does a model score higher
on the examples whose image an overlap test flagged than on the rest?"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, List, Optional

from medexp.config.ranges import at_least, probability
from medexp.config.schemas.detector import FREE_TEXT_FIELDS, DetectorBase


@dataclass
class OverlapGapConfig(DetectorBase):
    """Gap in mean score between flagged and unflagged examples, images resampled and permuted."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    model_needs: ClassVar[str] = "scores"
    # The column of the cell model's score table holding each example's flag: a field of a record
    # of scores (the audit's `flagged`, its image detector's verdict), true or false.
    flag: str = "flagged"
    score: str = "mean_logprob"  # the score compared (a record holds one of mean_logprob, sum_logprob)
    # The example meta field naming its image (SLAKE: img_name); questions on one image are one
    # cluster. An example without it falls back to its image path, else is a cluster of its own.
    image_field: str = "img_name"
    strata: List[str] = field(default_factory=lambda: ["answer_type"])  # meta fields: the gap per value as well
    # A model config (conf/model) scored on the same examples with the same flags, contamination-free
    # (BLIP-2 predates the overlap source): the target's gap minus its gap is reported too.
    baseline: Optional[str] = None
    n_permutations: int = at_least(10000, 1)  # image-flag permutations of the p-values
    n_resamples: int = at_least(2000, 10)  # image bootstrap resamples of the intervals
    confidence: float = probability(0.95)
