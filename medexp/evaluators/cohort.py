"""Evaluators of the cohort detectors (mink_tail, topk_jaccard, loss).

A cohort cell scores the cell's model and every model named in ``detector.cohort`` (conf/model
names, each optionally with overrides: :func:`medexp.config.listed_model_config`; plus the
external baselines of control=external_baseline) on the same examples, each through the score
cache so a model is loaded only on a cache miss, then hands the aligned score tables to the
detector.
"""

from __future__ import annotations

import logging

from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import PowerCount
from medexp.evaluators.context import CellContext

log = logging.getLogger("medexp")


def cohort_scores(ctx: CellContext):
    """Score tables of the cell's model (the target) and of each reference model, by model name.

    The references are the models of ``detector.cohort``, then those of ``ctx.cohort_additions``
    (external baselines) not already among them; the target is never its own reference.
    """
    from medexp.config.schemas import ControlKind
    from medexp.detectors import CohortScores

    if ControlKind(ctx.cfg.control.kind) is ControlKind.synthetic:  # the calibration model's cohort, no scoring
        from medexp.controls.synthetic import synthetic_cell_scores

        return synthetic_cell_scores(ctx.cfg, ctx.examples)
    listed = listed_references(ctx.cfg)
    target = str(ctx.cfg.model.name)
    tables = {target: ctx.example_scores()}
    for reference in [*listed.values(), *ctx.cohort_additions]:
        label = str(reference.name)
        if label != target and label not in tables:
            tables[label] = _reference_scores(ctx, reference)
    return CohortScores(target, tables)


def listed_references(cfg) -> dict:
    """The model configs of ``detector.cohort`` by model name, the cell's model (the target) left out."""
    from medexp.config import listed_model_configs

    names = list(cfg.detector.cohort)
    if not names:
        raise ValueError(f"detector.cohort is empty: {cfg.detector.name} needs reference model configs (conf/model)")
    # entries are names, or names with overrides ("demo_clean_mc demo.seed=11")
    return listed_model_configs(names, str(cfg.model.name), "detector.cohort")


def _reference_scores(ctx: CellContext, reference):
    """A reference model's score table of the cell's examples; the model loads on a cache miss only
    (a model on record is read from its file)."""
    log.info("cohort model %s: scores of %d examples (cached after the first time)", reference.name, len(ctx.examples))
    return ctx.example_scores(model_cfg=reference)


def mink_tail(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import mink_tail_detector

    result = mink_tail_detector(cohort_scores(ctx), ctx.cfg.detector, ctx.seed, ctx.benchmark.frame())
    return _with_mde(ctx, "mink_tail", result, {})


def topk_jaccard(ctx: CellContext) -> DetectorResult:
    from medexp.config.schemas import RankBy
    from medexp.detectors import topk_jaccard_detector
    from medexp.detectors.power_simulation import simulated_kind

    detector = ctx.cfg.detector
    result = topk_jaccard_detector(cohort_scores(ctx), detector, ctx.seed)
    ranking = {"top_k": int(detector.top_k), "rank_by_delta": int(RankBy(detector.rank_by) is RankBy.delta)}
    return _with_mde(ctx, simulated_kind("topk_jaccard", detector), result, ranking)


def loss(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import loss_detector

    result = loss_detector(cohort_scores(ctx), ctx.cfg.detector, ctx.seed, ctx.benchmark.frame())
    return _with_mde(ctx, "loss", result, {})


def _with_mde(ctx: CellContext, kind: str, result: DetectorResult, extra_sizes: dict) -> DetectorResult:
    """The cell's simulated MDE at its examples and cohort size (``medexp.evaluators.simulated_power_cache``)."""
    from medexp.evaluators.simulated_power_cache import with_simulated_mde

    sizes = {"examples": int(result.metrics["n_examples"]), "models": int(result.metrics["n_models"]), **extra_sizes}
    return with_simulated_mde(result, kind, sizes, float(ctx.cfg.detector.alpha), ctx.cache_dir)


def cohort_sizes(cfg, load) -> PowerCount:
    """``python -m medexp.power``'s count for a cohort detector: the examples and the cohort's models
    (a top-K detector adds its top_k and ranking)."""
    from medexp.config.schemas import RankBy

    n_examples = len(load())
    references = list(listed_references(cfg))
    sizes = {"examples": n_examples, "models": 1 + len(references)}
    counted = (f"{n_examples} examples; cohort: the target {cfg.model.name} and {len(references)} references "
               f"({', '.join(references)}; external baselines a control adds are not counted)")
    if "top_k" in cfg.detector:
        sizes.update(top_k=int(cfg.detector.top_k), rank_by_delta=int(RankBy(cfg.detector.rank_by) is RankBy.delta))
        counted += f"; top_k={cfg.detector.top_k}, rank_by={RankBy(cfg.detector.rank_by).value}"
    return PowerCount(n=n_examples, lines=(counted,), sizes=sizes)
