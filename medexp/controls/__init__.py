"""Controls: transformations of a cell's inputs that test what a detector's signal means.

=================  ======================================================  ===================
control kind       what the detector sees                                  detectors
=================  ======================================================  ===================
none               the benchmark in released order                         all
order_hash         examples sorted by SHA-1 of example_id                  all
order_answer_len   sorted by the cell model's answer token count           all but image_nn
order_mink         sorted by the cell model's Min-K%++ score               all but image_nn
blind_image        every example without its image                         all but image_nn, exch
negative_images    an out-of-domain image set instead of the benchmark     image_nn only
external_baseline  the detector also run on pre-domain baseline models     all but image_nn
synthetic          scores from the calibration model (controls.synthetic)  cohort, composition_sweep
=================  ======================================================  ===================

The runner loads :func:`control_benchmark`, then :func:`apply_control` makes the examples the
detector sees, in their order, from the released ones (score orders are given the cell model's
scores). A control transforms values and returns new ones; it never receives the cell's context,
which lives above it: the evaluators run the detector again for each external baseline
(:mod:`medexp.evaluators.baselines`) with the models :func:`baseline_models` lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from medexp.benchmarks.base import Benchmark, Example
from medexp.config.schemas import ControlKind
from medexp.controls.baselines import baseline_models, merge_baseline_results
from medexp.controls.fit import check_control_fits
from medexp.controls.images import negative_image_set, without_images
from medexp.controls.ordering import answer_lengths, mink_scores, order_by_hash, order_by_values, order_spearman


def control_benchmark(cfg, cache_dir: str | Path, needs=None, pixels: bool = True) -> Benchmark:
    """The benchmark a cell runs on: the cell's bench, or a negative control's image set.
    ``needs``: the example fields the detector reads (rows unusable for them are skipped);
    ``pixels=False``: the cell reads no image, so the bench may be read from its annotations alone."""
    from medexp.benchmarks import load_benchmark_from_config

    if ControlKind(cfg.control.kind) is ControlKind.negative_images:
        return negative_image_set(cfg.control, cache_dir)
    return load_benchmark_from_config(cfg.bench, cache_dir, needs, pixels=pixels)


def apply_control(control_cfg, examples: list[Example],
                  example_scores: Callable[[list[Example]], "pd.DataFrame"] | None = None) -> list[Example]:
    """The examples the detector should test, in the control's order: a new list made from the
    released ``examples``. Score orders call ``example_scores(examples)`` for the cell model's
    per-example score table of them (cached by the caller); other controls never do."""
    kind = ControlKind(control_cfg.kind)
    examples = list(examples)
    if kind is ControlKind.order_hash:
        # An order derived from content alone: no model could have trained on it.
        return order_by_hash(examples)
    if kind is ControlKind.blind_image:
        return without_images(examples)
    if kind in (ControlKind.order_answer_len, ControlKind.order_mink):
        if example_scores is None:
            raise ValueError(f"control={control_cfg.name} orders by the model's scores: it needs the cell's scores")
        table = example_scores(examples)
        if kind is ControlKind.order_answer_len:
            return order_by_values(examples, answer_lengths(table), "answer token count")
        return order_by_values(examples, mink_scores(table, control_cfg.k_percent), "Min-K%++ score")
    # none, negative_images (its image set, as loaded), external_baseline, synthetic: as released.
    return examples


def control_nonmembers(kind: ControlKind, nonmembers: list[Example]) -> list[Example]:
    """The non-members a member/non-member detector compares the cell's examples with (another
    split, loaded as released), with their inputs changed as :func:`apply_control` changes the
    members': without images under ``blind_image``, or the test would compare image-less members
    with imaged non-members. Orders concern the members alone, so non-members stay as released."""
    if kind is ControlKind.blind_image:
        return without_images(nonmembers)
    return nonmembers


if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "apply_control",
    "baseline_models",
    "check_control_fits",
    "control_nonmembers",
    "control_benchmark",
    "merge_baseline_results",
    "order_spearman",
]
