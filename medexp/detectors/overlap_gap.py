"""Detector ``overlap_gap``: the score advantage of examples on flagged images.

An image-overlap test (a flag source, :mod:`medexp.evaluators.flag_sources`: a record's flag
column, the release's own split overlap, image_nn against a corpus) flags the benchmark images
that have a copy or near-duplicate in a model's likely training sources. If the model learnt those
images' questions, it scores their gold answers higher than the others': the gap in mean score,
flagged minus unflagged, with an interval resampling images and a p-value permuting the flags
among images (:mod:`medexp.stats.cluster_gap`), overall and per stratum (answer type). Flagged
images may simply be easier (common views, typical anatomy), which a model that never saw them
shows too: with a baseline model the gap minus the baseline's gap is reported with its own
interval and p-value, and that difference is what contamination would explain.

The statistics here (:func:`gap_result`) serve the answer gap too
(:mod:`medexp.detectors.overlap_gap_answers`, accuracy in place of the score). Power: the MDE is
Cohen's d of the image means (flagged against unflagged images, the t-test of image means
approximating the permutation test), also stated in the gap's own unit at the observed spread of
the image means (``mde_gap``); a cell whose MDE exceeds ``detector.sizeable_effect`` is
``underpowered``, and says so when its gap is not significant.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from medexp.config.schemas import OverlapGapConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.kernel.hashing import derive_seed
from medexp.stats.cluster_gap import cluster_gap, gap_difference
from medexp.stats.detector_power import MDE_POWER, TWO_SAMPLE_T, PowerFormula, detector_mde

ALL = "all"
GAP_POWER = PowerFormula(TWO_SAMPLE_T, "one", "images (flagged and unflagged)",
                         "Cohen's d of the images' mean scores (accuracies, on answers), flagged against unflagged",
                         "one-sided image-permutation test of the flagged-minus-unflagged gap (the t-test of image "
                         "means approximates it)")


def gap_frame(values: pd.DataFrame, flags: pd.DataFrame, examples: pd.DataFrame,
              baseline: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per example that every table holds: ``values`` (example_id, value), ``flags``
    (example_id, flagged), ``examples`` (example_id, image, strata columns) and ``baseline``
    (example_id, value: the baseline model's; None: no baseline column)."""
    frame = values[["example_id", "value"]].merge(flags[["example_id", "flagged"]].rename(columns={"flagged": "flag"}),
                                                  on="example_id", how="inner", validate="one_to_one")
    frame = frame.merge(examples, on="example_id", how="inner", validate="one_to_one")
    if baseline is not None:
        frame = frame.merge(baseline[["example_id", "value"]].rename(columns={"value": "baseline"}), on="example_id",
                            how="inner", validate="one_to_one")
    return frame.astype({"flag": bool})


def gap_result(frame: pd.DataFrame, cfg, seed: int, measure: str) -> DetectorResult:
    """The gap of ``frame`` (:func:`gap_frame`) overall and per stratum, its baseline difference,
    MDE and power verdict; ``measure`` names the compared value (a score column, accuracy)."""
    with_baseline = "baseline" in frame
    strata = [(ALL, None)] + [(name, value) for name in cfg.strata
                              for value in sorted(frame[name].dropna().astype(str).unique())]
    rows, warnings = [], []
    for name, value in strata:
        part = frame if name == ALL else frame[frame[name].astype(str) == value]
        label = ALL if name == ALL else f"{name}={value}"
        try:
            rows.append({"stratum": label, **_stratum(part, cfg, derive_seed(seed, "overlap_gap", label),
                                                      with_baseline)})
        except ValueError as error:  # a stratum without flagged or unflagged images has no gap
            if name == ALL:
                raise
            warnings.append(f"stratum {label}: no gap ({error})")
    table = pd.DataFrame(rows)
    overall = rows[0]
    n_flagged_images = int(overall["n_flagged_images"])
    n_unflagged_images = int(overall["n_images"]) - n_flagged_images
    mde = detector_mde(GAP_POWER, n_flagged_images, float(cfg.alpha), n_negative=n_unflagged_images)
    underpowered = not mde <= float(cfg.sizeable_effect)  # NaN (a group of one image): no power at all
    metrics = {
        "p_value": overall["p_value"], "statistic": overall["gap"], "n_examples": float(len(frame)),
        "flag": float(overall["p_value"] < cfg.alpha), "n_permutations": float(cfg.n_permutations),
        "permutation_seed": float(seed),
        **{key: float(overall[key]) for key in overall if key not in ("p_value", "stratum")},
        "mde": mde, "mde_gap": mde * overall["image_sd"], "underpowered": float(underpowered),
    }
    for row in rows[1:]:
        for key in ("gap", "gap_ci_low", "gap_ci_high", "p_value", "n_examples", "gap_minus_baseline",
                    "gap_minus_baseline_ci_low", "gap_minus_baseline_ci_high", "gap_minus_baseline_p_value"):
            if key in row:
                metrics[f"{key}.{_metric_part(row['stratum'])}"] = float(row[key])
    if underpowered and not metrics["flag"]:
        warnings.append(underpowered_warning(metrics, cfg, measure, n_unflagged_images))
    return DetectorResult(metrics, table, "gap_by_stratum", {"gap_by_stratum": _figure(table, cfg, measure)},
                          warnings=warnings)


def underpowered_warning(metrics: dict[str, float], cfg, measure: str, n_unflagged_images: int) -> str:
    """Why a gap that is not significant is no evidence of no gap: the groups were too small."""
    groups = f"{int(metrics['n_flagged_images'])} flagged against {n_unflagged_images} unflagged images"
    if math.isnan(metrics["mde"]):
        power = f"{groups} give the test no power (a group of fewer than two images)"
    else:
        power = (f"{groups} detect a gap only from Cohen's d {metrics['mde']:.2f} of the image means (about "
                 f"{metrics['mde_gap']:.3g} in {measure}) at power {MDE_POWER:g} and alpha {cfg.alpha:g}, above "
                 f"detector.sizeable_effect={cfg.sizeable_effect:g}")
    return f"underpowered: {power}: a smaller gap would go unseen, so p = {metrics['p_value']:.3g} is no evidence of no gap"


def overlap_gap_detector(target: pd.DataFrame, flags: pd.DataFrame, examples: pd.DataFrame, cfg, seed: int,
                         baseline: pd.DataFrame | None = None) -> DetectorResult:
    """``target``: the cell model's score table; ``flags``: example_id, flagged; ``examples``: one
    row per example_id with ``image`` (the cluster) and the strata columns; ``baseline``: a
    reference model's score table (None: no difference is computed). Examples missing from any
    table are left out (their count is in ``n_examples``)."""
    def values(scores: pd.DataFrame) -> pd.DataFrame:
        return scores[["example_id", cfg.score]].rename(columns={cfg.score: "value"})

    frame = gap_frame(values(target), flags, examples, None if baseline is None else values(baseline))
    return gap_result(frame, cfg, seed, str(cfg.score))


def _metric_part(label: str) -> str:
    """``answer_type=CLOSED`` as a metric name part (``answer_type.CLOSED``): MLflow allows no ``=``."""
    return re.sub(r"[^0-9A-Za-z_\-. /]", "_", label.replace("=", "."))


def _stratum(part: pd.DataFrame, cfg, seed: int, with_baseline: bool) -> dict[str, float]:
    images = part["image"].tolist()
    gap = cluster_gap(part["value"].to_numpy(), part["flag"].to_numpy(), images, int(cfg.n_permutations),
                      int(cfg.n_resamples), seed, float(cfg.confidence))
    row = {"gap": gap.gap, "gap_ci_low": gap.low, "gap_ci_high": gap.high, "p_value": gap.p_value,
           "n_exceed": float(gap.n_exceed), "n_examples": float(gap.n_items), "n_flagged": float(gap.n_flagged_items),
           "n_images": float(gap.n_images), "n_flagged_images": float(gap.n_flagged_images),
           "mean_flagged": gap.mean_flagged, "mean_unflagged": gap.mean_unflagged, "image_sd": gap.image_sd}
    if with_baseline:
        difference = gap_difference(part["value"].to_numpy(), part["baseline"].to_numpy(), part["flag"].to_numpy(),
                                    images, int(cfg.n_permutations), int(cfg.n_resamples), seed,
                                    float(cfg.confidence))
        row.update({"baseline_gap": difference.gap_reference, "gap_minus_baseline": difference.difference,
                    "gap_minus_baseline_ci_low": difference.low, "gap_minus_baseline_ci_high": difference.high,
                    "gap_minus_baseline_p_value": difference.p_value})
    return row


def _figure(table: pd.DataFrame, cfg, measure: str):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 0.5 + 0.45 * len(table)), layout="constrained")
    axes = figure.subplots()
    y = np.arange(len(table))
    axes.errorbar(table["gap"], y, xerr=[table["gap"] - table["gap_ci_low"], table["gap_ci_high"] - table["gap"]],
                  fmt="o", label="gap")
    if "gap_minus_baseline" in table:
        axes.errorbar(table["gap_minus_baseline"], y + 0.2,
                      xerr=[table["gap_minus_baseline"] - table["gap_minus_baseline_ci_low"],
                            table["gap_minus_baseline_ci_high"] - table["gap_minus_baseline"]],
                      fmt="s", label=f"gap minus {cfg.baseline}'s")
        axes.legend(fontsize=8)
    axes.axvline(0.0, color="grey", lw=0.8)
    axes.set(yticks=y, yticklabels=table["stratum"], xlabel=f"{measure}: flagged minus unflagged (images resampled)")
    return figure


DECLARATION = DetectorDeclaration(
    name="overlap_gap",
    schema=OverlapGapConfig,
    evaluator="medexp.evaluators.overlap:overlap_gap",
    inputs=frozenset({Input.scores, Input.flags}),
    controls=SCORING_CONTROLS,
    power=GAP_POWER,
    power_count="medexp.evaluators.overlap:flagged_images",
    docs="docs/real-records.md#scores-on-flagged-images-overlap_gap",
)
