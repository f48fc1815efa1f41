"""Detector ``mink_tail``: Min-K%++ tail enrichment relative to a model cohort (Detector 3).

Per example, m_i is the mean of the lowest K% (at least one) of the answer's Min-K%++ token
values z_t = (log p(x_t) - mu_t) / sigma_t (Zhang et al., 2025), as in the original Min-K%++
score. Delta_i = m_i(target) - median of m_i over the other cohort models, and the detector
summarises the right tail of Delta (q95, q99, max, Pr[Delta > t] for each configured t). The
controlled audit flags a cell when Pr[Delta > 100] > 5%; both numbers are configurable.

Units. z_t is a log-probability difference divided by a log-probability spread, so it is
dimensionless (the audit writes "nats"). A mean of z values still reaches the thousands that
the audit reports (Delta_max ~ 3400): a model that puts almost all its mass on one wrong
token has sigma_t -> 0, and the gold token's z_t falls like -1/sqrt(mass left over), so a
cohort median dragged down by such tokens makes Delta huge. That is why the audit's
thresholds (50, 100) only make sense for cohorts of large-vocabulary models; the offline demo
config uses thresholds on the scale its tiny models produce.

p-value. A cohort-relabel permutation test of the flag statistic: under the null that on
every example the cohort's models are exchangeable, the model in the target's place is a
uniformly random cohort member, drawn independently per example; the statistic is the
fraction of examples with Delta > flag_threshold. It asks whether the target's tail is
heavier than a random cohort member's, which the bare flag does not. It does not remove the
calibration confound of the audit (Section 4.10): a cohort whose median sits on low-gain
models makes every high-gain model stand out, contaminated or not, so a flagged cell needs
an external pre-domain baseline in the cohort before it is read as memorization.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, MinkTailConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.cohort import CohortScores, meta_columns, min_k_scores, model_colors, relabel_metrics
from medexp.detectors.declaration import SCORING_CONTROLS, DetectorDeclaration, Input, Simulated
from medexp.stats.cohort import cohort_relabel_test, deltas_vs_cohort

log = logging.getLogger("medexp")

TOKEN_COLUMN = "token_minkpp_z"


def minkpp_matrix(cohort: CohortScores, k_percent: float) -> np.ndarray:
    """(examples x models) Min-K%++ scores m_i, the target in column 0."""
    return cohort.matrix(lambda table: min_k_scores(table[TOKEN_COLUMN], k_percent), "Min-K%++")


def threshold_label(threshold: float) -> str:
    """Metric and column name of Pr[Delta > threshold], e.g. ``pr_delta_gt_100``."""
    return f"pr_delta_gt_{threshold:g}"


def mink_tail_detector(cohort: CohortScores, cfg, seed: int, meta: pd.DataFrame | None = None) -> DetectorResult:
    """Delta tail of the target against the cohort median; ``meta`` (example_id + fields) adds strata."""
    _check_config(cfg)
    cohort.require_references(2, "mink_tail")
    deltas = deltas_vs_cohort(minkpp_matrix(cohort, cfg.k_percent))
    target = deltas[:, 0]
    thresholds = sorted({float(t) for t in cfg.thresholds} | {float(cfg.flag_threshold)})
    test = cohort_relabel_test(deltas > cfg.flag_threshold, 0, cfg.n_permutations, seed)
    metrics = {
        "p_value": test.p_value,
        "statistic": test.statistic,
        **_tail_summary(target, thresholds),
        **relabel_metrics(test, deltas.shape),
        "flag": float(tail_flag(target, cfg.flag_threshold, cfg.flag_fraction)),
    }
    table = _strata_table(target, cohort.example_ids, meta, cfg, thresholds)
    figure = _figure(deltas, cohort.models, table, cfg)
    return DetectorResult(metrics, table, "per_stratum", {"delta_tail": figure})


def tail_flag(delta: np.ndarray, flag_threshold: float, flag_fraction: float) -> bool:
    """The audit's flag: more than ``flag_fraction`` of the examples have Delta > ``flag_threshold``."""
    return bool(np.mean(delta > flag_threshold) > flag_fraction)


def check_flag_fraction(flag_fraction: float) -> None:
    if not 0 <= flag_fraction < 1:
        raise ValueError(f"detector.flag_fraction must be in [0, 1), got {flag_fraction}")


def _check_config(cfg) -> None:
    check_flag_fraction(cfg.flag_fraction)
    if not cfg.thresholds:
        raise ValueError("detector.thresholds must list at least one Delta threshold")


def _tail_summary(delta: np.ndarray, thresholds: list[float]) -> dict[str, float]:
    summary = {
        "delta_mean": float(delta.mean()),
        "delta_q95": float(np.quantile(delta, 0.95)),
        "delta_q99": float(np.quantile(delta, 0.99)),
        "delta_max": float(delta.max()),
    }
    summary.update({threshold_label(t): float(np.mean(delta > t)) for t in thresholds})
    return summary


def _strata_table(delta, example_ids, meta, cfg, thresholds) -> pd.DataFrame:
    """One row for all examples, then one per value of each configured meta field."""
    rows = [{"field": "all", "value": "all", "n": delta.size, **_tail_summary(delta, thresholds)}]
    fields = meta_columns(meta, list(cfg.strata), log)
    if fields:
        aligned = meta.set_index("example_id").loc[example_ids, fields].reset_index(drop=True)
        for name in fields:
            values = aligned[name].astype(str).to_numpy()
            for value in sorted(set(values)):
                chosen = delta[values == value]
                rows.append({"field": name, "value": value, "n": chosen.size, **_tail_summary(chosen, thresholds)})
    table = pd.DataFrame(rows)
    table["flag"] = table[threshold_label(cfg.flag_threshold)] > cfg.flag_fraction
    return table


def _figure(deltas: np.ndarray, models: list[str], strata: pd.DataFrame, cfg):
    from matplotlib.figure import Figure

    flag_column = threshold_label(cfg.flag_threshold)
    figure = Figure(figsize=(10, 3.6), layout="constrained")
    axes = figure.subplots(1, 2, width_ratios=[3, 2])
    bins = np.histogram_bin_edges(deltas, bins=60)
    for column, (model, color) in enumerate(zip(models, model_colors(len(models)))):
        axes[0].hist(deltas[:, column], bins=bins, histtype="step", label=model, color=color,
                     linewidth=2.0 if column == 0 else 1.0)
    for threshold in sorted({*cfg.thresholds, cfg.flag_threshold}):
        axes[0].axvline(threshold, color="black", linestyle="--", linewidth=0.8)
    axes[0].set_yscale("log")
    axes[0].set(xlabel="Delta = m(model) - median m(other models)", ylabel="examples",
                title=f"Min-K%++ Delta (target {models[0]} in red)")
    axes[0].legend(fontsize=7)
    by_stratum = strata[strata["field"] != "all"]
    labels = [f"{row.field}={row.value}" for row in by_stratum.itertuples()]
    axes[1].barh(labels, by_stratum[flag_column], color=np.where(by_stratum["flag"], "tab:red", "gray"))
    axes[1].axvline(cfg.flag_fraction, color="black", linestyle="--", linewidth=0.8)
    axes[1].invert_yaxis()
    axes[1].tick_params(axis="y", labelsize=7)
    axes[1].set(xlabel=f"Pr[Delta > {cfg.flag_threshold:g}]", title="per stratum")
    return figure


DECLARATION = DetectorDeclaration(
    name="mink_tail",
    schema=MinkTailConfig,
    evaluator="medexp.evaluators.cohort:mink_tail",
    inputs=frozenset({Input.token_scores, Input.references}),
    controls=SCORING_CONTROLS | {ControlKind.synthetic},
    power=Simulated("a cohort-relabel permutation test of a tail fraction"),
    power_count="medexp.evaluators.cohort:cohort_sizes",
    docs="docs/detectors.md#cohort-detectors-mink_tail-topk_jaccard-loss",
)
