"""Evaluators of the cohort detectors (mink_tail, topk_jaccard, loss).

A cohort cell scores the cell's model and every model named in ``detector.cohort`` on the same
examples (each through the score cache, so a model is loaded only on a cache miss), then hands
the aligned score tables to the detector.
"""

from __future__ import annotations

import functools
import logging

from medexp.config.schemas import LossConfig, MinkTailConfig, TopKJaccardConfig
from medexp.detectors.base import DetectorResult
from medexp.runner.evaluate import CellContext, evaluator, model_cache_key

log = logging.getLogger("medexp")


def cohort_scores(ctx: CellContext):
    """Score tables of the cell's model (the target) and of each cohort model, by model name."""
    from medexp.config import model_config
    from medexp.detectors import CohortScores
    from medexp.models import load_scorer
    from medexp.scoring import example_scores

    names = list(ctx.cfg.detector.cohort)
    if not names:
        raise ValueError(f"detector.cohort is empty: {ctx.cfg.detector.name} needs reference model configs (conf/model)")
    target = str(ctx.cfg.model.name)
    tables = {target: example_scores(ctx.scorer, ctx.model_key, ctx.examples, ctx.cache_dir)}
    for name in names:
        reference = model_config(name)
        label = str(reference.name)
        if target in (name, label):
            continue  # the cell's model is never its own reference
        if label in tables:
            raise ValueError(f"detector.cohort names the model {label!r} twice: {names}")
        log.info("cohort model %s: scoring %d examples (cached after the first time)", label, len(ctx.examples))
        scorer = functools.cache(functools.partial(load_scorer, reference, ctx.cache_dir))
        tables[label] = example_scores(scorer, model_cache_key(reference), ctx.examples, ctx.cache_dir)
    return CohortScores(target, tables)


@evaluator(MinkTailConfig)
def _mink_tail(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import mink_tail_detector

    return mink_tail_detector(cohort_scores(ctx), ctx.cfg.detector, ctx.seed, ctx.benchmark.frame())


@evaluator(TopKJaccardConfig)
def _topk_jaccard(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import topk_jaccard_detector

    return topk_jaccard_detector(cohort_scores(ctx), ctx.cfg.detector)


@evaluator(LossConfig)
def _loss(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import loss_detector

    return loss_detector(cohort_scores(ctx), ctx.cfg.detector, ctx.seed, ctx.benchmark.frame())
