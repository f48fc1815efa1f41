"""Evaluators of the exchangeability detectors (exch, exch_rank): the cell model's likelihood of
the examples in the order the control chose, against shuffled orders."""

from __future__ import annotations

from medexp.detectors.base import DetectorResult
from medexp.evaluators.context import CellContext


def exch(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import exch_detector
    from medexp.scoring import shard_order_scores

    table = shard_order_scores(ctx.scorer, ctx.model_key, ctx.examples, ctx.cache_dir, ctx.cfg.detector, ctx.seed)
    return exch_detector(table, ctx.cfg.detector, len(ctx.examples))


def exch_rank(ctx: CellContext) -> DetectorResult:
    from medexp.detectors import exch_rank_detector

    table = ctx.example_scores()
    return exch_rank_detector(table, ctx.cfg.detector, ctx.seed)
