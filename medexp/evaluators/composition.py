"""Evaluator of ``composition_sweep``, the synthetic-only detector (control=synthetic).

The cohort detectors need nothing here under control=synthetic: ``cohort_scores`` hands them
the calibration model's score tables instead of scored models.
"""

from __future__ import annotations

from medexp.config.schemas import ControlKind
from medexp.detectors.base import DetectorResult
from medexp.evaluators.context import CellContext


def composition_sweep(ctx: CellContext) -> DetectorResult:
    """Fresh benchmarks drawn like bench.synthetic, noise as control.noise_sd, seeded by the cell."""
    from medexp.benchmarks.synthetic import easiness_sampler, synthetic_parameters
    from medexp.detectors import composition_sweep_detector

    cfg = ctx.cfg
    if ControlKind(cfg.control.kind) is not ControlKind.synthetic:
        raise ValueError(f"detector={cfg.detector.name} simulates the calibration model: it runs only under "
                         f"control=synthetic (with bench=synthetic), not control={cfg.control.name}")
    sampler = easiness_sampler(synthetic_parameters(cfg.bench))
    return composition_sweep_detector(sampler, cfg.detector, float(cfg.control.noise_sd), ctx.seed)
