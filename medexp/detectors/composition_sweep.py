"""Detector ``composition_sweep``: how the cohort's make-up alone makes mink_tail flag a clean model.

The controlled audit's Figure 7b (Appendix B). A clean probe (gain ``probe_gain``) is scored in
a cohort of ``n_anchors`` clean anchors (``anchor_gain``) plus k low-gain outliers
(``outlier_gain``), for k = 0..max_outliers, on ``draws`` fresh synthetic benchmarks. Nobody is
contaminated. Per draw the probe's Delta_i = s_i(probe) - median of the others' s_i (the
mink_tail Delta) is tested with the mink_tail flag rule, Pr[Delta > flag_threshold] >
flag_fraction, and the result per k is the fraction of draws flagged: a false-positive flag
probability. By Eq. 2 of the audit, Delta = (g_probe - median gain) e_i + noise, so the probe
is never flagged while the median gain is the anchors' and always once the outliers hold the
median (two outliers among two anchors: median gain (0.05 + 1) / 2).

Descriptive: a simulation summary, with no p-value and no flag of its own. Draw d uses the
generator seeded by (seed, d) for its easiness and every model's noise, and the cohorts of all
k share those draws (the k-outlier cohort is the first k outliers of the largest one), so the
curve over k compares like with like.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from medexp.config.schemas import CompositionSweepConfig, ControlKind
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input, Untested
from medexp.detectors.mink_tail import check_flag_fraction, tail_flag, threshold_label
from medexp.stats.calibration import Easiness, calibration_scores
from medexp.stats.cohort import deltas_vs_cohort

EasinessSampler = Callable[[np.random.Generator], Easiness]


def composition_sweep_detector(draw_easiness: EasinessSampler, cfg, noise_sd: float, seed: int) -> DetectorResult:
    """False-positive flag probability of a clean probe per number of low-gain outliers.

    ``draw_easiness`` draws one benchmark's easiness with the generator it is given;
    ``noise_sd`` is the calibration model's noise; ``cfg`` a ``CompositionSweepConfig``.
    """
    from tqdm.auto import tqdm

    _check_config(cfg)
    pr_column = threshold_label(cfg.flag_threshold)
    gains = [cfg.probe_gain] + [cfg.anchor_gain] * cfg.n_anchors + [cfg.outlier_gain] * cfg.max_outliers
    rows = []
    n_examples = None
    for draw in tqdm(range(cfg.draws), desc="composition sweep", unit="draw", disable=None, leave=False):
        rng = np.random.default_rng([seed, draw])
        easiness = draw_easiness(rng).values
        n_examples = easiness.size
        scores = np.column_stack([calibration_scores(easiness, gain, 0.0, noise_sd, rng) for gain in gains])
        for k in range(cfg.max_outliers + 1):
            probe_delta = deltas_vs_cohort(scores[:, : 1 + cfg.n_anchors + k])[:, 0]
            rows.append({
                "k": k,
                "draw": draw,
                pr_column: float(np.mean(probe_delta > cfg.flag_threshold)),
                "delta_max": float(probe_delta.max()),
                "flag": tail_flag(probe_delta, cfg.flag_threshold, cfg.flag_fraction),
            })
    per_draw = pd.DataFrame(rows)
    table = _per_outlier_count(per_draw, pr_column, cfg.n_anchors)
    metrics = {"n_examples": float(n_examples), "draws": float(cfg.draws), "max_outliers": float(cfg.max_outliers)}
    for row in table.itertuples():
        metrics[f"false_positive_flag_prob_{row.k}"] = float(row.false_positive_flag_prob)
        metrics[f"{pr_column}_mean_{row.k}"] = float(getattr(row, f"{pr_column}_mean"))
    figure = _figure(table, per_draw, pr_column, cfg)
    return DetectorResult(metrics, table, "per_outlier_count", {"composition_sweep": figure},
                          extra_tables={"per_draw": per_draw}, descriptive=True)


def _check_config(cfg) -> None:
    if cfg.n_anchors < 2:
        raise ValueError(f"detector.n_anchors must be at least 2 (mink_tail needs two reference models "
                         f"besides the probe), got {cfg.n_anchors}")
    if cfg.max_outliers < 0:
        raise ValueError(f"detector.max_outliers must be >= 0, got {cfg.max_outliers}")
    if cfg.draws < 1:
        raise ValueError(f"detector.draws must be at least 1, got {cfg.draws}")
    check_flag_fraction(cfg.flag_fraction)


def _per_outlier_count(per_draw: pd.DataFrame, pr_column: str, n_anchors: int) -> pd.DataFrame:
    """One row per k: draws, how many flagged the probe, their fraction, and the tail fraction's spread."""
    grouped = per_draw.groupby("k", sort=True)
    table = pd.DataFrame({
        "n_models": grouped.size().index + 1 + n_anchors,
        "draws": grouped.size(),
        "flagged": grouped["flag"].sum().astype(int),
        "false_positive_flag_prob": grouped["flag"].mean(),
        f"{pr_column}_mean": grouped[pr_column].mean(),
        f"{pr_column}_min": grouped[pr_column].min(),
        f"{pr_column}_max": grouped[pr_column].max(),
        "delta_max_mean": grouped["delta_max"].mean(),
    })
    return table.rename_axis("k").reset_index()


def _figure(table: pd.DataFrame, per_draw: pd.DataFrame, pr_column: str, cfg):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 3.6), layout="constrained")
    left, right = figure.subplots(1, 2)
    left.bar(table["k"], table["false_positive_flag_prob"], color="tab:red", alpha=0.8)
    left.plot(table["k"], table["false_positive_flag_prob"], color="black", marker="o")
    left.set(xlabel="low-gain outliers in the cohort (k)", ylabel="P(clean probe flagged)", ylim=(0, 1.05),
             xticks=list(table["k"]),
             title=f"false-positive flag probability over {cfg.draws} draws")
    groups = [per_draw.loc[per_draw["k"] == k, pr_column].to_numpy() for k in table["k"]]
    right.boxplot(groups, positions=list(table["k"]))
    right.axhline(cfg.flag_fraction, color="black", linestyle="--", linewidth=0.8, label="flag fraction")
    right.set(xlabel="low-gain outliers in the cohort (k)", ylabel=f"Pr[Delta > {cfg.flag_threshold:g}]",
              title=f"probe tail (gains: probe {cfg.probe_gain:g}, {cfg.n_anchors} anchors {cfg.anchor_gain:g}, "
                    f"outliers {cfg.outlier_gain:g})")
    right.title.set_fontsize(8)
    right.legend(fontsize=7)
    return figure


DECLARATION = DetectorDeclaration(
    name="composition_sweep",
    schema=CompositionSweepConfig,
    evaluator="medexp.evaluators.composition:composition_sweep",
    inputs=frozenset({Input.token_scores, Input.references}),
    controls=SCORING_CONTROLS | {ControlKind.synthetic},
    power=Untested("a descriptive false-positive sweep of the mink_tail rule over cohort compositions"),
    power_count=None,
    docs="docs/power.md",
)
