"""Summaries of per-example values: a mean with its bootstrap interval, a sign test over
replicates, Spearman correlations raw and within groups, and one-sided permutation tests of a
difference in means (two independent groups; paired units)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class MeanCI:
    """A mean and its percentile bootstrap interval (NaN below two values)."""

    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class SignTest:
    """Two-sided exact binomial test that positive and negative values are equally likely
    (zeros dropped); p = 1 when no value is non-zero."""

    n_positive: int
    n_negative: int
    p_value: float


@dataclass(frozen=True)
class Correlation:
    rho: float
    p_value: float
    n: int


def mean_ci(values, n_resamples: int, level: float, seed: int) -> MeanCI:
    """Mean of ``values`` with a percentile bootstrap interval (unit: one value)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = float(values.mean())
    if values.size < 2:
        return MeanCI(mean, np.nan, np.nan, 1)
    if np.all(values == values[0]):  # every resample is the same value (SciPy would warn of degeneracy)
        return MeanCI(mean, mean, mean, int(values.size))
    result = sps.bootstrap((values,), np.mean, vectorized=True, n_resamples=n_resamples, confidence_level=level,
                           method="percentile", rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return MeanCI(mean, float(interval.low), float(interval.high), int(values.size))


def sign_test(values) -> SignTest:
    values = np.asarray(values, dtype=np.float64)
    positive, negative = int(np.sum(values > 0)), int(np.sum(values < 0))
    if positive + negative == 0:
        return SignTest(0, 0, 1.0)
    p_value = sps.binomtest(positive, positive + negative, 0.5, alternative="two-sided").pvalue
    return SignTest(positive, negative, float(p_value))


def spearman(x, y) -> Correlation:
    """Spearman's rho with SciPy's p-value; NaN when either side is constant or n < 3."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return Correlation(np.nan, np.nan, int(x.size))
    result = sps.spearmanr(x, y)
    return Correlation(float(result.statistic), float(result.pvalue), int(x.size))


def within_group(values, groups) -> np.ndarray:
    """``values`` minus the mean of their group (residualisation on a categorical variable)."""
    values = np.asarray(values, dtype=np.float64)
    groups = np.asarray(groups)
    out = np.empty_like(values)
    for group in np.unique(groups):
        selected = groups == group
        out[selected] = values[selected] - values[selected].mean()
    return out


@dataclass(frozen=True)
class MeanDifferenceTest:
    """One-sided permutation test that the first group's mean exceeds the second's.

    p = (1 + #{difference(relabelled) >= difference}) / (1 + n_permutations); the unit relabelled
    is one value (group labels permuted over the pooled values)."""

    statistic: float  # mean(first) - mean(second)
    p_value: float
    n_permutations: int
    null_mean: float
    null_std: float


def mean_difference_test(first, second, n_permutations: int, seed: int) -> MeanDifferenceTest:
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if first.size == 0 or second.size == 0:
        raise ValueError(f"both groups need values, got {first.size} and {second.size}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")

    def difference(x, y, axis=-1):
        return x.mean(axis=axis) - y.mean(axis=axis)

    result = sps.permutation_test((first, second), difference, permutation_type="independent", vectorized=True,
                                  n_resamples=n_permutations, alternative="greater", rng=np.random.default_rng(seed))
    null = np.asarray(result.null_distribution)
    return MeanDifferenceTest(float(result.statistic), float(result.pvalue), int(null.size), float(null.mean()),
                              float(null.std()))


def paired_mean_difference_test(first, second, n_permutations: int, seed: int) -> MeanDifferenceTest:
    """One-sided paired permutation test that mean(first - second) exceeds 0.

    ``first[i]`` and ``second[i]`` belong to one unit (a benchmark pair); under the null they are
    exchangeable within the unit, so each unit's difference keeps its size and takes either sign
    (SciPy's ``permutation_type="samples"``: exact enumeration when ``2**n`` is at most
    ``n_permutations``, else random sign flips with the +1 convention)."""
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if first.shape != second.shape or first.ndim != 1 or first.size == 0:
        raise ValueError(f"paired values need one flat, non-empty shape, got {first.shape} and {second.shape}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")

    def difference(x, y, axis=-1):
        return np.mean(x - y, axis=axis)

    result = sps.permutation_test((first, second), difference, permutation_type="samples", vectorized=True,
                                  n_resamples=n_permutations, alternative="greater", rng=np.random.default_rng(seed))
    null = np.asarray(result.null_distribution)
    return MeanDifferenceTest(float(result.statistic), float(result.pvalue), int(null.size), float(null.mean()),
                              float(null.std()))
