"""The steps every answering detector's evaluator shares (MM-Detect's, MedVIGIL, paired
perturbation, the overlap gap on answers): the model-independent probe seed, the cell model's
cached answers and another model's to the same probes, and the gate that refuses a verdict on too
few answers.

Probes are drawn from a seed that depends on the global seed, the benchmark and the detector but
not on the model: every model of a grid answers the same probes, so their cells compare probe for
probe.
"""

from __future__ import annotations

import logging

from medexp.detectors.base import DetectorResult
from medexp.evaluators.context import CellContext
from medexp.kernel.hashing import derive_seed

log = logging.getLogger("medexp")


def probe_seed(ctx: CellContext) -> int:
    """The seed probes are drawn from: the same for every model of a benchmark and detector."""
    return derive_seed(ctx.cfg.seed, "probes", ctx.cfg.bench.name, ctx.cfg.detector.name)


def answers(ctx: CellContext, probes, skipped=()):
    """The cell model's response table of ``probes`` (cached, see :mod:`medexp.answers.dispatch`);
    ``skipped``: the probe set's (probe id, reason) pairs, whose lines an imported file may hold."""
    from medexp.answers.dispatch import model_answers

    return model_answers(ctx.cfg.model, ctx.model_key, ctx.scorer, probes, ctx.cfg.detector.answer, ctx.cache_dir,
                         [probe_id for probe_id, _ in skipped])


def other_model_answers(ctx: CellContext, model_cfg, probes):
    """Another model's response table of the same probes (a clean reference, a baseline), asked as
    the cell's model is asked (``detector.answer``); a white-box model loads only on a cache miss."""
    import functools

    from medexp.answers.dispatch import model_answers
    from medexp.models import load_scorer
    from medexp.models.keys import model_cache_key

    log.info("model %s: answering %d probes (cached after the first time)", model_cfg.name, len(probes))
    scorer = functools.cache(functools.partial(load_scorer, model_cfg, ctx.cache_dir))
    return model_answers(model_cfg, model_cache_key(model_cfg, ctx.cache_dir), scorer, probes,
                         ctx.cfg.detector.answer, ctx.cache_dir)


def gated(ctx: CellContext, responses, who: str | None = None) -> tuple[dict[str, float], list[str]]:
    """The answer metrics and warnings of a response table that holds enough answers for a
    verdict (``detector.answer.min_answered``), or :class:`~medexp.answers.coverage.TooFewAnswers`."""
    from medexp.answers.coverage import require_answered

    return require_answered(responses, float(ctx.cfg.detector.answer.min_answered),
                            who or f"model={ctx.cfg.model.name}")


def with_answer_counts(result: DetectorResult, counts: tuple[dict[str, float], list[str]]) -> DetectorResult:
    """``result`` with the answer metrics and warnings of :func:`gated` added."""
    metrics, warnings = counts
    result.metrics.update(metrics)
    result.warnings.extend(warnings)
    return result


def require_probes(ctx: CellContext, probe_set) -> None:
    """Refuse a cell whose probe set is empty, naming why each probe was skipped."""
    if not probe_set.probes:
        reasons = probe_set.skip_counts()
        raise ValueError(f"detector={ctx.cfg.detector.name}: no probe could be made from the "
                         f"{len(ctx.examples)} examples of bench={ctx.cfg.bench.name} (skipped: {reasons})")
