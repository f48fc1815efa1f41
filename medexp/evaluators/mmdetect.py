"""Evaluators of MM-Detect's detectors: probes from the cell's examples, the model's answers
(white box, OpenAI-compatible server or imported file, cached), then the pure detector.

Probes are drawn from the model-independent probe seed (:func:`~medexp.evaluators.answering.probe_seed`):
every model of a grid answers the same permutations and masked words, so their cells compare
probe for probe. Slot guessing's probes need a translator, so their recipe lives here rather than
in :mod:`medexp.probes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from medexp.detectors.base import DetectorResult
from medexp.evaluators.answering import answers, gated, probe_seed, require_probes, with_answer_counts
from medexp.evaluators.context import CellContext


def _run(ctx: CellContext, probe_set, detector, fact_fields=None) -> DetectorResult:
    """Answer the probes and run ``detector``; ``fact_fields``: the meta fields the detector
    reads per probe (its strata by default)."""
    from medexp.detectors.answer_arms import probe_facts

    require_probes(ctx, probe_set)
    judged = answers(ctx, probe_set.probes, probe_set.skipped)
    counts = gated(ctx, judged)
    facts = probe_facts(probe_set.probes, list(fact_fields or ctx.cfg.detector.strata))
    return with_answer_counts(detector(judged.table, facts, ctx.cfg.detector, ctx.seed, probe_set.skipped), counts)


def option_order(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.option_order import option_order_detector

    return _run(ctx, option_order_probes(ctx), option_order_detector)


def option_order_probes(ctx: CellContext):
    """Each multiple-choice example in canonical order and in ``detector.n_variants`` shuffles."""
    from medexp.probes.mmdetect import option_order_probe_set

    return option_order_probe_set(ctx.examples, ctx.cfg.detector, probe_seed(ctx))


def text_only(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.text_only import text_only_detector

    detector = ctx.cfg.detector
    fields = list(dict.fromkeys([*detector.strata, *detector.prior_by]))
    return _run(ctx, text_only_probes(ctx), text_only_detector, fields)


def text_only_probes(ctx: CellContext):
    """Each multiple-choice example asked without its image."""
    from medexp.probes.mmdetect import text_only_probe_set

    return text_only_probe_set(ctx.examples, ctx.cfg.detector)


def slot_guess(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.slot_guess import slot_guess_detector

    return _run(ctx, slot_guess_probes(ctx), slot_guess_detector)


def slot_guess_probes(ctx: CellContext):
    """The masked original and back-translated texts; as cloze tests when answered by likelihood."""
    from medexp.config.schemas import AnswerMode

    probe_set = slot_guess_probe_set(ctx.examples, ctx.cfg.detector, probe_seed(ctx), ctx.cache_dir)
    if AnswerMode(ctx.cfg.detector.answer.mode) is AnswerMode.likelihood:
        probe_set = replace(probe_set, probes=cloze_probes(probe_set.probes))
    return probe_set


def slot_guess_probe_set(examples: Sequence, cfg, seed: int, cache_dir: str | Path):
    """``slot_mask`` and ``back_translation`` probes (``cfg``: a slot_guess detector config):
    the texts are back-translated by ``cfg.translator`` (cached under ``cache_dir``), refused when
    more than ``cfg.max_unchanged`` come back unchanged, and masked with ``cfg.keywords``."""
    from medexp.probes.keywords import keyword_source
    from medexp.probes.slots import SlotSettings, slot_probes
    from medexp.translators import back_translate

    trips = back_translate(examples, cfg.translator, str(cfg.text_field), cache_dir, float(cfg.max_unchanged))
    source = keyword_source(cfg.keywords, examples)
    settings = SlotSettings(seed, str(cfg.slot_template), str(cfg.mask_token))
    return slot_probes(examples, [trip.source for trip in trips], [trip.back for trip in trips], source, settings)


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
