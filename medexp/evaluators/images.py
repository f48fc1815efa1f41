"""Evaluator of image near-neighbour overlap (image_nn): the cell's images against its reference
corpus (loaded with the cell's inputs)."""

from __future__ import annotations

from medexp.detectors.base import DetectorResult
from medexp.evaluators.context import CellContext


def image_nn(ctx: CellContext) -> DetectorResult:
    """Image near-neighbour overlap: needs no language model, so the cell's model plays no part."""
    from medexp.evaluators.simulated_power import with_simulated_mde
    from medexp.hashing import derive_seed
    from medexp.images.audit import image_nn_audit

    detector = ctx.cfg.detector
    # Seeded by corpus and backbone, not by the cell: all benchmarks share one calibrated tau.
    seed = derive_seed(ctx.cfg.seed, "image_nn", detector.corpus.name, detector.embedder.name)
    result = image_nn_audit(ctx.examples, detector, ctx.cache_dir, seed, corpus=ctx.corpus)
    sizes = {"images": int(result.metrics["n_images"]), "calibration": int(result.metrics["calibration_size"]),
             "tau_alpha": float(detector.tau_alpha)}
    return with_simulated_mde(result, "image_nn", sizes, float(detector.alpha), ctx.cache_dir)
