"""The steps every answering detector's evaluator shares (MM-Detect's, MedVIGIL, paired
perturbation, the overlap gap on answers): the model-independent probe seed, the cell model's
cached answers and another model's to the same probes, both judged by the cell's judge, and the
gate that refuses a verdict on too few replies.

Probes are drawn from a seed that depends on the global seed, the benchmark and the detector but
not on the model: every model of a grid answers the same probes, so their cells compare probe for
probe.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from medexp.detectors.base import DetectorResult
from medexp.evaluators.context import CellContext
from medexp.kernel.hashing import derive_seed

log = logging.getLogger("medexp")


def probe_seed(ctx: CellContext) -> int:
    """The seed probes are drawn from: the same for every model of a benchmark and detector."""
    return derive_seed(ctx.cfg.seed, "probes", ctx.cfg.bench.name, ctx.cfg.detector.name)


def answers(ctx: CellContext, probes, skipped=()):
    """The cell model's replies to ``probes`` (cached, see :mod:`medexp.answers.dispatch`) judged by
    the cell's judge: a :class:`~medexp.answers.judges.stage.JudgedAnswers`. ``skipped``: the probe
    set's (probe id, reason) pairs, whose lines an imported file may hold."""
    from medexp.answers.dispatch import model_answers
    from medexp.answers.judges.stage import judge_responses

    responses = model_answers(ctx.cfg.model, ctx.model_key, ctx.scorer, probes, ctx.cfg.detector.answer,
                              ctx.cache_dir, [probe_id for probe_id, _ in skipped])
    return judge_responses(responses, probes, ctx.cfg.judge, ctx.cache_dir)


def other_model_answers(ctx: CellContext, model_cfg, probes):
    """Another model's replies to the same probes (a clean reference, a baseline), asked as the
    cell's model is asked (``detector.answer``) and judged by the cell's judge; a white-box model
    loads only on a cache miss."""
    import functools

    from medexp.answers.dispatch import model_answers
    from medexp.answers.judges.stage import judge_responses
    from medexp.models import load_scorer
    from medexp.models.keys import model_cache_key

    log.info("model %s: answering %d probes (cached after the first time)", model_cfg.name, len(probes))
    scorer = functools.cache(functools.partial(load_scorer, model_cfg, ctx.cache_dir))
    responses = model_answers(model_cfg, model_cache_key(model_cfg, ctx.cache_dir), scorer, probes,
                              ctx.cfg.detector.answer, ctx.cache_dir)
    return judge_responses(responses, probes, ctx.cfg.judge, ctx.cache_dir)


@dataclass
class AnswerCounts:
    """What a cell logs of one model's judged answers: the answer and verdict counts, the warnings,
    and its judged.parquet."""

    metrics: dict[str, float]
    warnings: list[str]
    tables: dict[str, object]


def gated(ctx: CellContext, judged, who: str | None = None, prefix: str = "") -> AnswerCounts:
    """The counts of a judged table that holds enough replies for a verdict
    (``detector.answer.min_answered``), else :class:`~medexp.answers.coverage.TooFewAnswers`.
    ``prefix`` names another model's counts and table (``reference.<name>.``, ``baseline.``)."""
    from medexp.answers.coverage import require_answered

    metrics, warnings = require_answered(judged.table, float(ctx.cfg.detector.answer.min_answered),
                                         who or f"model={ctx.cfg.model.name}")
    metrics.update(judged.metrics)
    label = f" ({who})" if who else ""
    return AnswerCounts({f"{prefix}{name}": value for name, value in metrics.items()},
                        warnings + [f"{warning}{label}" for warning in judged.warnings],
                        {f"judged{'_' + prefix.rstrip('.') if prefix else ''}": judged.record()})


def with_answer_counts(result: DetectorResult, *counts: AnswerCounts) -> DetectorResult:
    """``result`` with the counts, warnings and judged tables of :func:`gated` added."""
    for count in counts:
        result.metrics.update(count.metrics)
        result.warnings.extend(count.warnings)
        result.extra_tables.update(count.tables)
    return result


def require_probes(ctx: CellContext, probe_set) -> None:
    """Refuse a cell whose probe set is empty, naming why each probe was skipped."""
    if not probe_set.probes:
        reasons = probe_set.skip_counts()
        raise ValueError(f"detector={ctx.cfg.detector.name}: no probe could be made from the "
                         f"{len(ctx.examples)} examples of bench={ctx.cfg.bench.name} (skipped: {reasons})")
