"""Detector ``overlap_gap``: the score advantage of examples on flagged images.

An image-overlap test (the audit's image detector, a ``split_overlap`` cell) flags the benchmark
images that have a near-duplicate in a model's likely training sources. If the model learnt those
images' questions, it scores their gold answers higher than the others': the gap in mean score,
flagged minus unflagged, with an interval resampling images and a p-value permuting the flags
among images (:mod:`medexp.stats.cluster_gap`), overall and per stratum (answer type). Flagged
images may simply be easier (common views, typical anatomy), which a model that never saw them
shows too: with a baseline model the gap minus the baseline's gap is reported with its own
interval and p-value, and that difference is what contamination would explain.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, OverlapGapConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input
from medexp.kernel.hashing import derive_seed
from medexp.stats.cluster_gap import cluster_gap, gap_difference
from medexp.stats.detector_power import TWO_SAMPLE_T, PowerFormula, detector_mde

ALL = "all"


def example_flags(table: pd.DataFrame, column: str) -> np.ndarray:
    """The flag column of a score table as booleans (true/false, 1/0, "true"/"false")."""
    if column not in table.columns:
        raise ValueError(f"detector.flag={column!r} is not a column of the model's scores (has {list(table.columns)}); "
                         "a record's flag field travels with its scores")
    words = {True: True, False: False, 1: True, 0: False, "true": True, "false": False, "1": True, "0": False}
    values = [words.get(value.strip().lower() if isinstance(value, str) else value) for value in table[column]]
    bad = [(example_id, value) for example_id, value, read in zip(table["example_id"], table[column], values)
           if read is None]
    if bad:
        raise ValueError(f"{len(bad)} flag(s) in column {column!r} are not true/false (first: {bad[0][0]}: {bad[0][1]!r})")
    return np.asarray(values, dtype=bool)


def overlap_gap_detector(target: pd.DataFrame, examples: pd.DataFrame, cfg, seed: int,
                         baseline: pd.DataFrame | None = None) -> DetectorResult:
    """``target``: the cell model's score table with the flag column; ``examples``: one row per
    example_id with ``image`` (the cluster) and the strata columns; ``baseline``: a reference
    model's score table (None: no difference is computed). Examples missing from any table are
    left out (their count is in ``n_examples``)."""
    frame = target[["example_id", cfg.score]].rename(columns={cfg.score: "score"})
    frame["flag"] = example_flags(target, cfg.flag)
    frame = frame.merge(examples, on="example_id", how="inner", validate="one_to_one")
    if baseline is not None:
        frame = frame.merge(baseline[["example_id", cfg.score]].rename(columns={cfg.score: "baseline"}),
                            on="example_id", how="inner", validate="one_to_one")
    strata = [(ALL, None)] + [(name, value) for name in cfg.strata
                              for value in sorted(frame[name].dropna().astype(str).unique())]
    rows, warnings = [], []
    for name, value in strata:
        part = frame if name == ALL else frame[frame[name].astype(str) == value]
        label = ALL if name == ALL else f"{name}={value}"
        try:
            rows.append({"stratum": label, **_stratum(part, cfg, derive_seed(seed, "overlap_gap", label),
                                                      baseline is not None)})
        except ValueError as error:  # a stratum without flagged or unflagged images has no gap
            if name == ALL:
                raise
            warnings.append(f"stratum {label}: no gap ({error})")
    table = pd.DataFrame(rows)
    overall = rows[0]
    metrics = {
        "p_value": overall["p_value"], "statistic": overall["gap"], "n_examples": float(len(frame)),
        "flag": float(overall["p_value"] < cfg.alpha), "n_permutations": float(cfg.n_permutations),
        "permutation_seed": float(seed),
        **{key: float(overall[key]) for key in overall if key not in ("p_value", "stratum")},
        "mde": detector_mde(DECLARATION.power, int(overall["n_flagged_images"]), float(cfg.alpha),
                            n_negative=int(overall["n_images"] - overall["n_flagged_images"])),
    }
    for row in rows[1:]:
        for key in ("gap", "gap_ci_low", "gap_ci_high", "p_value", "n_examples", "gap_minus_baseline",
                    "gap_minus_baseline_ci_low", "gap_minus_baseline_ci_high", "gap_minus_baseline_p_value"):
            if key in row:
                metrics[f"{key}.{_metric_part(row['stratum'])}"] = float(row[key])
    return DetectorResult(metrics, table, "gap_by_stratum", {"gap_by_stratum": _figure(table, cfg)},
                          warnings=warnings)


def _metric_part(label: str) -> str:
    """``answer_type=CLOSED`` as a metric name part (``answer_type.CLOSED``): MLflow allows no ``=``."""
    return re.sub(r"[^0-9A-Za-z_\-. /]", "_", label.replace("=", "."))


def _stratum(part: pd.DataFrame, cfg, seed: int, with_baseline: bool) -> dict[str, float]:
    images = part["image"].tolist()
    gap = cluster_gap(part["score"].to_numpy(), part["flag"].to_numpy(), images, int(cfg.n_permutations),
                      int(cfg.n_resamples), seed, float(cfg.confidence))
    row = {"gap": gap.gap, "gap_ci_low": gap.low, "gap_ci_high": gap.high, "p_value": gap.p_value,
           "n_exceed": float(gap.n_exceed), "n_examples": float(gap.n_items), "n_flagged": float(gap.n_flagged_items),
           "n_images": float(gap.n_images), "n_flagged_images": float(gap.n_flagged_images),
           "mean_flagged": gap.mean_flagged, "mean_unflagged": gap.mean_unflagged}
    if with_baseline:
        difference = gap_difference(part["score"].to_numpy(), part["baseline"].to_numpy(), part["flag"].to_numpy(),
                                    images, int(cfg.n_permutations), int(cfg.n_resamples), seed,
                                    float(cfg.confidence))
        row.update({"baseline_gap": difference.gap_reference, "gap_minus_baseline": difference.difference,
                    "gap_minus_baseline_ci_low": difference.low, "gap_minus_baseline_ci_high": difference.high,
                    "gap_minus_baseline_p_value": difference.p_value})
    return row


def _figure(table: pd.DataFrame, cfg):
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
    axes.set(yticks=y, yticklabels=table["stratum"], xlabel=f"{cfg.score}: flagged minus unflagged (images resampled)")
    return figure


DECLARATION = DetectorDeclaration(
    name="overlap_gap",
    schema=OverlapGapConfig,
    evaluator="medexp.evaluators.overlap:overlap_gap",
    inputs=frozenset({Input.scores}),
    controls=SCORING_CONTROLS,
    power=PowerFormula(TWO_SAMPLE_T, "one", "images (flagged and unflagged)",
                       "Cohen's d of the images' mean scores, flagged against unflagged",
                       "one-sided image-permutation test of the flagged-minus-unflagged gap in mean score (the t-test "
                       "of image means approximates it)"),
    power_count="medexp.evaluators.overlap:flagged_images",
    docs="docs/real-records.md#scores-on-flagged-images-overlap_gap",
)
