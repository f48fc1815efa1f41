"""Evaluators of the multiple-choice item in other forms (none_option, renumbered_options,
open_ended; :mod:`medexp.probes.option_forms`): probes from the cell's examples, the model's
answers, then the pure detector. Probes are drawn from the model-independent probe seed, so every
model of a grid answers the same probes."""

from __future__ import annotations

from medexp.detectors.base import DetectorResult
from medexp.evaluators.answering import probe_seed
from medexp.evaluators.context import CellContext
from medexp.evaluators.mmdetect import _run


def none_option(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.none_option import none_option_detector

    return _run(ctx, none_option_probes(ctx), none_option_detector)


def none_option_probes(ctx: CellContext):
    """Each multiple-choice example as released and with its gold replaced by the none option."""
    from medexp.probes.option_forms import none_option_probes as make

    return make(ctx.examples, probe_seed(ctx), str(ctx.cfg.detector.none_text))


def renumbered_options(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.renumbered_options import renumbered_options_detector

    return _run(ctx, renumbered_options_probes(ctx), renumbered_options_detector)


def renumbered_options_probes(ctx: CellContext):
    """Each multiple-choice example under its letters and under each of ``detector.label_sets``."""
    from medexp.probes.option_forms import renumbered_probes

    return renumbered_probes(ctx.examples, [list(labels) for labels in ctx.cfg.detector.label_sets])


def open_ended(ctx: CellContext) -> DetectorResult:
    from medexp.detectors.open_ended import open_ended_detector

    return _run(ctx, open_ended_probes(ctx), open_ended_detector)


def open_ended_probes(ctx: CellContext):
    """Each multiple-choice example with its options and without them."""
    from medexp.probes.option_forms import open_ended_probes as make

    return make(ctx.examples)
