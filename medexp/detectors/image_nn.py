"""Detector 1, image near-neighbour overlap: statistics over nearest-neighbour distances.

Inputs are two sets of cosine distances to a reference corpus: each benchmark image's distance
to its nearest corpus image, and a calibration sample of ``m`` corpus images' distances to their
nearest *other* corpus image. The threshold is ``tau = Q_alpha``, the k-th smallest calibration
distance with ``k = ceil(alpha m)``, and a benchmark image is flagged when its distance is
strictly below tau: it sits closer to the corpus than all but a fraction ``alpha`` of corpus
images sit to each other.

P-value. Null hypothesis: a benchmark image is no closer to the corpus than corpus images are
to each other, i.e. benchmark and calibration distances are exchangeable draws. Then the number
X of flagged images among n is exactly beta-binomial, X ~ BetaBinom(n, k, m - k + 1): given tau,
X is Binomial(n, F(tau)), and F(tau) of the k-th of m order statistics is Beta(k, m - k + 1).
The one-sided p-value is P(X >= x_observed). This is the binomial test of the flag count against
alpha with the sampling error of tau folded in (it tends to Binomial(n, alpha) as m grows);
ignoring that error would inflate false positives when n is not small next to m. Ties (e.g. the
discrete distances of a perceptual hash) only make the strict ``< tau`` test more conservative.
The calibration distances are close to independent when the sample is small next to the corpus
(5,000 of 1.85M in the audit). When it is the whole corpus, mutual nearest neighbours share a
distance and the test is slightly liberal (a synthetic check gave a 6.7% false-positive rate at
nominal 5% with m = N = 600, and 4% with m = 600 of N = 1,800).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from medexp.detectors.base import DetectorResult

NEIGHBOUR_COLUMNS = ("example_id", "position", "neighbour_id", "distance")


def null_rank(alpha: float, m: int) -> int:
    """k = ceil(alpha m), at least 1: the rank of tau among the m calibration distances."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if m < 1:
        raise ValueError("threshold calibration needs at least one corpus distance")
    return max(1, math.ceil(alpha * m - 1e-9))  # the epsilon absorbs float error in alpha * m


def null_threshold(calibration: np.ndarray, alpha: float) -> float:
    """tau = Q_alpha: the ceil(alpha m)-th smallest calibration distance."""
    calibration = _finite(calibration, "calibration distances")
    k = null_rank(alpha, len(calibration))
    return float(np.partition(calibration, k - 1)[k - 1])


def flag_count_p_value(n_flagged: int, n: int, m: int, k: int) -> float:
    """P(X >= n_flagged) for X ~ BetaBinom(n, k, m - k + 1) (see the module docstring)."""
    from scipy.special import logsumexp
    from scipy.stats import betabinom

    if n_flagged <= 0:
        return 1.0
    # summing the tail's pmf keeps tiny p-values accurate (1 - cdf cancels to noise near 1e-13)
    tail = betabinom.logpmf(np.arange(n_flagged, n + 1), n, k, m - k + 1)
    return float(min(1.0, np.exp(logsumexp(tail))))


def alpha_sweep(distances: np.ndarray, calibration: np.ndarray, alphas: Sequence[float]) -> pd.DataFrame:
    """Threshold, flag count, flag rate and p-value of each alpha (one row per alpha)."""
    m, n = len(calibration), len(distances)
    rows = []
    for alpha in sorted(alphas):
        k = null_rank(alpha, m)
        tau = null_threshold(calibration, alpha)
        flagged = int(np.count_nonzero(distances < tau))
        rows.append(
            {
                "alpha": float(alpha),
                "k": k,
                "tau": tau,
                "expected_flag_rate": k / (m + 1),
                "n_flagged": flagged,
                "flag_rate": flagged / n,
                "p_value": flag_count_p_value(flagged, n, m, k),
            }
        )
    return pd.DataFrame(rows)


def image_nn_detector(
    neighbours: pd.DataFrame,
    calibration: np.ndarray,
    tau_alpha: float,
    sweep_alphas: Sequence[float],
    test_alpha: float,
) -> DetectorResult:
    """Flag benchmark images closer than tau to the corpus; test the flag count (module docstring).

    ``neighbours`` has one row per benchmark image (columns ``NEIGHBOUR_COLUMNS``, extra columns
    are kept); ``calibration`` holds the self-excluded corpus distances. ``test_alpha`` is the
    level at which the cell is flagged (p < test_alpha).
    """
    missing = [column for column in NEIGHBOUR_COLUMNS if column not in neighbours]
    if missing:
        raise ValueError(f"neighbour table lacks column(s) {missing}")
    if neighbours.empty:
        raise ValueError("image_nn: no benchmark images to test")
    distances = _finite(neighbours["distance"].to_numpy(dtype=np.float64), "benchmark distances")
    calibration = _finite(calibration, "calibration distances")
    n, m = len(distances), len(calibration)
    k = null_rank(tau_alpha, m)
    tau = null_threshold(calibration, tau_alpha)
    table = neighbours.assign(flagged=distances < tau)
    n_flagged = int(table["flagged"].sum())
    p_value = flag_count_p_value(n_flagged, n, m, k)
    sweep = alpha_sweep(distances, calibration, sorted(set(sweep_alphas) | {tau_alpha}))
    flagged_pairs = table[table["flagged"]].sort_values(["distance", "position"], kind="stable").reset_index(drop=True)
    metrics = {
        "p_value": p_value,
        "statistic": n_flagged / n,
        "n_examples": float(n),
        "flag": float(p_value < test_alpha),
        "flag_rate": n_flagged / n,
        "n_flagged": float(n_flagged),
        "tau": tau,
        "tau_alpha": float(tau_alpha),
        "expected_flag_rate": k / (m + 1),
        "calibration_size": float(m),
        "n_zero_distance": float(np.count_nonzero(distances == 0.0)),  # identical vectors: exact duplicates
        "min_distance": float(distances.min()),
        "median_distance": float(np.median(distances)),
        "calibration_median_distance": float(np.median(calibration)),
    }
    figures = {"alpha_sweep": sweep_figure(sweep, tau_alpha), "nn_distances": distance_figure(distances, calibration, tau)}
    return DetectorResult(
        metrics, table, "nearest_neighbours", figures, extra_tables={"alpha_sweep": sweep, "flagged_pairs": flagged_pairs}
    )


def sweep_figure(sweep: pd.DataFrame, tau_alpha: float):
    """Flag rate against alpha (log-log), with the rate expected under the null."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0, 3.6), layout="constrained")
    axes = figure.add_subplot()
    axes.plot(sweep["alpha"], sweep["flag_rate"], "o-", label="benchmark flag rate")
    axes.plot(sweep["alpha"], sweep["expected_flag_rate"], "--", color="grey", label="expected under the null")
    axes.axvline(tau_alpha, linestyle=":", color="black", label=f"alpha = {tau_alpha:g}")
    axes.set_xlim(sweep["alpha"].min() / 1.5, sweep["alpha"].max() * 1.5)  # also for a single alpha
    axes.set_xscale("log")
    axes.set_yscale("symlog", linthresh=1e-3)  # zero rates stay visible
    axes.set_ylim(bottom=0.0, top=max(1e-2, float(sweep[["flag_rate", "expected_flag_rate"]].max().max())) * 1.5)
    axes.set_xlabel("alpha (tau = alpha-quantile of corpus NN distances)")
    axes.set_ylabel("share of benchmark images flagged")
    axes.legend(fontsize=8)
    return figure


def distance_figure(distances: np.ndarray, calibration: np.ndarray, tau: float):
    """Histograms of benchmark and calibration NN distances, with tau marked."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0, 3.6), layout="constrained")
    axes = figure.add_subplot()
    bins = np.linspace(0.0, max(float(distances.max()), float(calibration.max()), tau) * 1.02 + 1e-9, 60)
    axes.hist(calibration, bins=bins, density=True, alpha=0.5, label="corpus to corpus (self excluded)")
    axes.hist(distances, bins=bins, density=True, alpha=0.5, label="benchmark to corpus")
    axes.axvline(tau, color="black", linestyle=":", label=f"tau = {tau:.4g}")
    axes.set_xlabel("cosine distance to the nearest corpus image")
    axes.set_ylabel("density")
    axes.legend(fontsize=8)
    return figure


def _finite(values, what: str) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        raise ValueError(f"image_nn: no {what}")
    if not np.isfinite(values).all():
        raise ValueError(f"image_nn: {int((~np.isfinite(values)).sum())} non-finite {what}")
    return values
