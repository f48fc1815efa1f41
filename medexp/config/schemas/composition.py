"""Schema of the composition sweep (conf/detector/composition_sweep.yaml), the detector that runs
only under control=synthetic."""

from __future__ import annotations

from dataclasses import dataclass

from medexp.config.ranges import at_least, probability
from medexp.config.schemas.detector import DetectorBase


@dataclass
class CompositionSweepConfig(DetectorBase):
    """Appendix B, Fig. 7b: how often mink_tail flags a clean probe as the cohort gains
    low-gain outliers. Descriptive (no p-value); runs under control=synthetic only.

    For k = 0..max_outliers and each of ``draws`` fresh synthetic benchmarks (drawn like
    bench.synthetic), the cohort is the probe, ``n_anchors`` anchors and k outliers, all with
    offset 0, no contamination and noise control.noise_sd; the probe is flagged by the
    mink_tail rule Pr[Delta > flag_threshold] > flag_fraction.
    """

    n_anchors: int = at_least(2, 1)
    anchor_gain: float = 1.0
    probe_gain: float = 1.0
    outlier_gain: float = 0.05
    max_outliers: int = at_least(4, 0)
    draws: int = at_least(200, 1)
    flag_threshold: float = 100.0
    flag_fraction: float = probability(0.05)
