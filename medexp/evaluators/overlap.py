"""Evaluator of the overlap-gap detector: the cell model's per-example scores (scored, or read
from a record), its flag column, each example's image and strata, and the baseline's scores."""

from __future__ import annotations

import pandas as pd

from medexp.detectors.base import DetectorResult
from medexp.evaluators.context import CellContext


def overlap_gap(ctx: CellContext) -> DetectorResult:
    from medexp.config import listed_model_config
    from medexp.detectors.overlap_gap import overlap_gap_detector

    detector = ctx.cfg.detector
    baseline = None
    if detector.baseline:
        if str(detector.baseline) == str(ctx.cfg.model.name):
            raise ValueError(f"detector.baseline={detector.baseline} is the cell's own model")
        baseline = ctx.example_scores(model_cfg=listed_model_config(str(detector.baseline)))
    return overlap_gap_detector(ctx.example_scores(), example_clusters(ctx, detector), detector, ctx.seed, baseline)


def example_clusters(ctx: CellContext, detector) -> pd.DataFrame:
    """Per example: its image (the meta field ``detector.image_field``, else its image path, else
    None: a cluster of its own) and its strata fields."""
    rows = []
    for example in ctx.examples:
        image = example.meta.get(detector.image_field)
        if image is None and example.image is not None:
            image = str(example.image)
        rows.append({"example_id": example.example_id, "image": image,
                     **{name: example.meta.get(name) for name in detector.strata}})
    return pd.DataFrame(rows, columns=["example_id", "image", *detector.strata])
