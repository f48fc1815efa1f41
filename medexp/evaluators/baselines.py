"""A cell under control=external_baseline: the detector on the cell's model, then on each baseline.

Each baseline runs with its own scorer and the seed its own cell would get; cohort detectors also
take the baselines into the reference cohort (and a baseline's cohort includes the cell's model).
The baselines are listed and the results merged by :mod:`medexp.controls.baselines`; the contexts
are made here, in the layer that owns :class:`CellContext`.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Callable

from medexp.controls import baseline_models, merge_baseline_results
from medexp.detectors.base import DetectorResult
from medexp.evaluators.context import CellContext

log = logging.getLogger("medexp")


def baseline_context(ctx: CellContext, model_cfg, baselines: list) -> CellContext:
    """The cell context with ``model_cfg`` as the audited model: same benchmark, examples and
    control; the seed of the cell (baseline, bench, detector, control); a cohort extended by the
    other baselines and the cell's own model."""
    from medexp.kernel.cell import Cell

    cfg = copy.deepcopy(ctx.cfg)
    cfg.model = model_cfg
    seed = Cell.from_config(cfg).seed(cfg.seed)
    return dataclasses.replace(ctx, cfg=cfg, seed=seed, cohort_additions=[*baselines, ctx.cfg.model])


def run_with_baselines(ctx: CellContext, run: Callable[[CellContext], DetectorResult]) -> DetectorResult:
    """``run`` (an evaluator) on the cell and on each baseline, merged by
    :func:`medexp.controls.baselines.merge_baseline_results`."""
    baselines = baseline_models(ctx.cfg.control, ctx.cfg.model)
    ctx.cohort_additions = list(baselines)  # in place: the cell's own run keeps its loaded scorer and counts
    own = run(ctx)
    results = {}
    for model_cfg in baselines:
        log.info("control=%s: running %s on baseline %s", ctx.cfg.control.name, ctx.cfg.detector.name, model_cfg.name)
        results[str(model_cfg.name)] = run(baseline_context(ctx, model_cfg, baselines))
    return merge_baseline_results(own, results)
