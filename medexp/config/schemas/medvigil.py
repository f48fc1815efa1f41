"""Schema of the ``medvigil`` detector (conf/detector/medvigil.yaml): how its probes are made when
the benchmark is not the MedVIGIL release, how many bootstrap resamples its intervals take, and
the ``answer:`` section every probe is asked and judged with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from medexp.config.ranges import at_least
from medexp.config.schemas.answers import AnswerConfig
from medexp.config.schemas.detector import DetectorBase
from medexp.config.tiers import check_tier
from medexp.config.wording import BLUR_SIGMAS, EVIDENCE_KINDS, check_evidence_battery


@dataclass
class MedvigilConfig(DetectorBase):
    """MedVIGIL's evidence-perturbation battery and its correctness-conditioned metrics (MCS)."""

    answer: AnswerConfig = field(default_factory=AnswerConfig)
    # Probes made from a benchmark's regions of interest: which kinds, the blur sweep's sigmas in
    # pixels, and the regions' labels (None: all). On the release, which ships its own probes, only
    # blur (the sweep) and no_image apply: they re-ask its original probes.
    # The text families (paraphrase, negation, specificity_drop, knowledge_only, false_premise)
    # may be added where the examples carry their variants (meta paraphrase / variants: the demo).
    kinds: List[str] = field(default_factory=lambda: list(EVIDENCE_KINDS))
    sigmas: List[int] = field(default_factory=lambda: list(BLUR_SIGMAS))
    roi_labels: Optional[List[str]] = None
    # Letters: false keeps the release's convention (gold first, refusal last: E); true permutes
    # every probe's options, refusal included, from the probe seed (the letter-rotation arm).
    rotate: bool = False
    # Risk tiers from example meta: field -> value -> L1..L5 (the riskiest facet wins). Empty: the
    # examples' own meta risk_tier, if any. (A dict, not None, so that a command-line override
    # can fill it.)
    tiers: Dict[str, Dict[str, str]] = field(default_factory=dict)
    n_resamples: int = at_least(500, 1)  # case-clustered bootstrap resamples of every interval

    @staticmethod
    def check_values(node, path: str) -> str | None:
        try:
            check_evidence_battery(tuple(node.kinds), tuple(node.sigmas))
        except ValueError as error:
            return f"{path}.kinds / {path}.sigmas: {error}"
        for meta_field, values in node.tiers.items():
            if not values:
                return f"{path}.tiers.{meta_field} maps no value to a tier (e.g. {{Modality: L1}})"
            for value, tier in values.items():
                try:
                    check_tier(tier, f"{path}.tiers.{meta_field}.{value}")
                except ValueError as error:
                    return str(error)
        return None
