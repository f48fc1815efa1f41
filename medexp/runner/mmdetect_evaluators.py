"""Evaluators of MM-Detect's detectors: probes from the cell's examples, the model's answers
(white box, OpenAI-compatible server or imported file, cached), then the pure detector.

Probes are drawn from a seed that depends on the global seed, the benchmark and the detector but
not on the model: every model of a grid answers the same permutations and masked words, so their
cells compare probe for probe.
"""

from __future__ import annotations

from dataclasses import replace

from medexp.config.schemas import OptionOrderConfig, SlotGuessConfig, TextOnlyConfig
from medexp.detectors.base import DetectorResult
from medexp.hashing import derive_seed
from medexp.runner.evaluate import CellContext, evaluator


def probe_seed(ctx: CellContext) -> int:
    """The seed probes are drawn from: the same for every model of a benchmark and detector."""
    return derive_seed(ctx.cfg.seed, "probes", ctx.cfg.bench.name, ctx.cfg.detector.name)


def answers(ctx: CellContext, probes, skipped=()):
    """The cell model's response table of ``probes`` (cached, see :mod:`medexp.answers.dispatch`);
    ``skipped``: the probe set's (probe id, reason) pairs, whose lines an imported file may hold."""
    from medexp.answers.dispatch import model_answers

    return model_answers(ctx.cfg.model, ctx.model_key, ctx.scorer, probes, ctx.cfg.detector.answer, ctx.cache_dir,
                         [probe_id for probe_id, _ in skipped])


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


def _run(ctx: CellContext, probe_set, detector, fact_fields=None) -> DetectorResult:
    """Answer the probes and run ``detector``; ``fact_fields``: the meta fields the detector
    reads per probe (its strata by default)."""
    from medexp.detectors.answer_arms import probe_facts

    require_probes(ctx, probe_set)
    responses = answers(ctx, probe_set.probes, probe_set.skipped)
    counts = gated(ctx, responses)
    facts = probe_facts(probe_set.probes, list(fact_fields or ctx.cfg.detector.strata))
    return with_answer_counts(detector(responses, facts, ctx.cfg.detector, ctx.seed, probe_set.skipped), counts)


@evaluator(OptionOrderConfig)
def _option_order(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.option_order import option_order_detector
    from medexp.probes.mmdetect import option_order_probe_set

    return _run(ctx, option_order_probe_set(ctx.examples, ctx.cfg.detector, probe_seed(ctx)), option_order_detector)


@evaluator(TextOnlyConfig)
def _text_only(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.text_only import text_only_detector
    from medexp.probes.mmdetect import text_only_probe_set

    detector = ctx.cfg.detector
    fields = list(dict.fromkeys([*detector.strata, *detector.prior_by]))
    return _run(ctx, text_only_probe_set(ctx.examples, detector), text_only_detector, fields)


@evaluator(SlotGuessConfig)
def _slot_guess(ctx: CellContext) -> DetectorResult:
    from medexp.config.schemas import AnswerMode
    from medexp.detectors.slot_guess import slot_guess_detector
    from medexp.probes.mmdetect import slot_guess_probe_set

    probe_set = slot_guess_probe_set(ctx.examples, ctx.cfg.detector, probe_seed(ctx), ctx.cache_dir)
    if AnswerMode(ctx.cfg.detector.answer.mode) is AnswerMode.likelihood:
        probe_set = replace(probe_set, probes=cloze_probes(probe_set.probes))
    return _run(ctx, probe_set, slot_guess_detector)


def cloze_probes(probes: list) -> list:
    """Slot probes as cloze tests for a white-box model answering by likelihood: every keyword
    masked anywhere in the probe set is a candidate, and each fills the masked text (the original
    or the back-translated one, as the probe shows it) to be scored by the language model."""
    from medexp.answers.whitebox import MASK
    from medexp.probes.slots import mask_word

    vocabulary = sorted({word for probe in probes for word in probe.meta["candidates"]})
    out = []
    for probe in probes:
        cloze, _, _ = mask_word(probe.meta["text"], probe.meta["masked_word"], MASK)
        out.append(replace(probe, meta={**probe.meta, "candidates": vocabulary, "cloze": cloze}))
    return out
