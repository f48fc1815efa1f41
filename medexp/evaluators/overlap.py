"""Evaluator of the overlap-gap detector: the cell model's per-example scores (scored, or read
from a record), its flag column, each example's image and strata, and the baseline's scores."""

from __future__ import annotations

import pandas as pd

from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
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


def flagged_images(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for overlap_gap: its flagged and unflagged images. The
    questions' flags come from the cell model's scores (a record's flag column), its images from the
    benchmark (detector.image_field), each image's flag by the detector's own rule
    (:func:`medexp.stats.cluster_gap.image_flags`)."""
    from pathlib import Path

    from medexp.detectors.overlap_gap import example_flags
    from medexp.stats.cluster_gap import image_flags
    from medexp.stats.inflation import cluster_index

    benchmark = load()
    ctx = CellContext(cfg, 0, benchmark, list(benchmark.examples), Path(cfg.paths.cache_dir))
    scores = ctx.example_scores()
    flags = dict(zip(scores["example_id"], example_flags(scores, str(cfg.detector.flag))))
    clusters = example_clusters(ctx, cfg.detector)
    clusters = clusters[clusters["example_id"].isin(flags)]
    images = list(clusters["image"])
    image_flag = image_flags(clusters["example_id"].map(flags).to_numpy(dtype=bool),
                             cluster_index(images, len(images)), images)
    flagged = int(image_flag.sum())
    if flagged == 0 or flagged == image_flag.size:
        raise ValueError(f"detector={cfg.detector.name} needs flagged and unflagged images; model={cfg.model.name}'s "
                         f"{cfg.detector.flag} flags {flagged} of {image_flag.size} images")
    return PowerCount(n=int(image_flag.size), first=flagged, lines=(
        f"images: {flagged} flagged, {image_flag.size - flagged} unflagged (detector.flag={cfg.detector.flag} of "
        f"model={cfg.model.name}'s scores; an image's questions carry its flag)",))
