"""Case-clustered bootstrap: resample whole clusters (cases) with replacement.

Every probe of a case shares its image, risk tier and gold, so probes are not independent; the
resampling unit is the case, and all of a case's probes travel together. Statistics here are
functions of per-cluster totals (counts of probes, of correct answers, of agreeing pairs ...):
a resample is a vector of cluster multiplicities ``m`` (how often each case was drawn) and its
totals are ``m @ X`` for the cluster-by-count matrix ``X``, so 500 resamples of 300 cases are
one matrix product.

Streams: every draw comes from ``numpy.random.default_rng(seed)`` with the seed the caller derives
from its cell, so a cell's intervals do not depend on which other cells were run, or in which
order (the MedVIGIL harness draws all models from one shared ``random`` stream). A paired
comparison of two cells resamples the same cases for both, from :func:`pair_seed`, which is
symmetric in the two cells and ignores every other cell.

Intervals are percentile intervals (``numpy.quantile``, linear interpolation; order statistics
when some replicates are infinite) over the resamples
where the statistic is defined; a resample where it is not (no probe of a needed kind was drawn)
is left out and counted (``n_valid``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from medexp.kernel.hashing import derive_seed

N_RESAMPLES = 500
Statistic = Callable[[np.ndarray], Mapping[str, np.ndarray]]  # (R x F totals) -> name -> (R,) values


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    n_valid: int  # resamples where the statistic is defined
    n_resamples: int


@dataclass(frozen=True)
class PairedDifference(Interval):
    """An interval of ``a - b`` plus the two-sided bootstrap p-value of ``a == b``."""

    estimate_a: float = float("nan")
    estimate_b: float = float("nan")
    p_value: float = float("nan")


def pair_seed(seed: int, cell_a: str, cell_b: str) -> int:
    """The seed of a paired comparison: the same for (a, b) and (b, a), independent of other cells."""
    return derive_seed(seed, "paired-bootstrap", *sorted((cell_a, cell_b)))


def cluster_multiplicities(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    """``(n_resamples, n_clusters)`` counts: how many times each cluster is drawn in each resample."""
    if n_clusters < 1 or n_resamples < 1:
        raise ValueError(f"need at least one cluster and one resample (got {n_clusters}, {n_resamples})")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_clusters, size=(n_resamples, n_clusters))
    flat = draws + (np.arange(n_resamples) * n_clusters)[:, None]
    return np.bincount(flat.ravel(), minlength=n_resamples * n_clusters).reshape(n_resamples, n_clusters)


def percentile_interval(estimate: float, replicates: np.ndarray, confidence: float = 0.95) -> Interval:
    """The percentile interval of the defined (non-NaN) replicates."""
    replicates = np.asarray(replicates, dtype=np.float64)
    valid = replicates[~np.isnan(replicates)]
    if valid.size == 0:
        return Interval(float(estimate), float("nan"), float("nan"), 0, replicates.size)
    tail = (1.0 - confidence) / 2.0
    # interpolating between infinite replicates (an L* never reached) gives NaN: take order statistics
    method = "inverted_cdf" if np.isinf(valid).any() else "linear"
    low, high = np.quantile(valid, [tail, 1.0 - tail], method=method)
    return Interval(float(estimate), float(low), float(high), int(valid.size), replicates.size)


def cluster_bootstrap(totals: np.ndarray, statistic: Statistic, n_resamples: int = N_RESAMPLES, seed: int = 0,
                      confidence: float = 0.95) -> dict[str, Interval]:
    """Percentile intervals of every value ``statistic`` returns, resampling the rows of ``totals``.

    ``totals`` is the ``(clusters, counts)`` matrix; ``statistic`` maps an ``(R, counts)`` matrix of
    summed counts to arrays of length R.
    """
    totals = _matrix(totals)
    point = statistic(totals.sum(axis=0, keepdims=True))
    replicates = statistic(cluster_multiplicities(totals.shape[0], n_resamples, seed) @ totals)
    return {name: percentile_interval(float(np.asarray(point[name])[0]), replicates[name], confidence)
            for name in point}


def paired_cluster_bootstrap(totals_a: np.ndarray, totals_b: np.ndarray, statistic: Statistic,
                             n_resamples: int = N_RESAMPLES, seed: int = 0,
                             confidence: float = 0.95) -> dict[str, PairedDifference]:
    """Intervals and p-values of ``statistic(a) - statistic(b)`` over the same resampled clusters.

    Row ``i`` of both matrices is the same cluster. The p-value is two-sided,
    ``min(1, 2 * min(1 + #{d* <= 0}, 1 + #{d* >= 0}) / (1 + n_valid))``: 1 when every resampled
    difference is 0, ``2 / (n + 1)`` when all fall on one side.
    """
    totals_a, totals_b = _matrix(totals_a), _matrix(totals_b)
    if totals_a.shape != totals_b.shape:
        raise ValueError(f"paired totals must have the same shape (same clusters and counts): "
                         f"{totals_a.shape} vs {totals_b.shape}")
    point_a = statistic(totals_a.sum(axis=0, keepdims=True))
    point_b = statistic(totals_b.sum(axis=0, keepdims=True))
    weights = cluster_multiplicities(totals_a.shape[0], n_resamples, seed)
    rep_a, rep_b = statistic(weights @ totals_a), statistic(weights @ totals_b)
    out = {}
    for name in point_a:
        a, b = float(np.asarray(point_a[name])[0]), float(np.asarray(point_b[name])[0])
        differences = np.asarray(rep_a[name], dtype=np.float64) - np.asarray(rep_b[name], dtype=np.float64)
        interval = percentile_interval(a - b, differences, confidence)
        valid = differences[~np.isnan(differences)]
        if valid.size:
            below, above = int(np.sum(valid <= 0)), int(np.sum(valid >= 0))
            p_value = min(1.0, 2.0 * min(1 + below, 1 + above) / (1 + valid.size))
        else:
            p_value = float("nan")
        out[name] = PairedDifference(interval.estimate, interval.low, interval.high, interval.n_valid,
                                     interval.n_resamples, a, b, p_value)
    return out


def _matrix(totals) -> np.ndarray:
    matrix = np.asarray(totals, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] < 1:
        raise ValueError(f"totals must be a (clusters, counts) matrix with at least one cluster, got {matrix.shape}")
    return matrix
