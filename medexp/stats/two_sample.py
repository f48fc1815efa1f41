"""Two independent samples compared by location: a one-sided Welch t-test (means) and a one-sided
Mann-Whitney test (ranks, its statistic the AUC), each with the effect a reader needs beside p."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class WelchTest:
    """Welch's t-test that the first sample's mean exceeds the second's."""

    t: float
    df: float  # Welch-Satterthwaite degrees of freedom
    p_value: float
    mean_difference: float  # mean(first) - mean(second)
    cohens_d: float  # the difference over the pooled standard deviation
    n_first: int
    n_second: int


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney test that the first sample tends to exceed the second."""

    auc: float  # U / (n1 n2): P(first > second) + P(tie) / 2
    p_value: float
    n_first: int
    n_second: int


def welch_greater(first, second) -> WelchTest:
    """One-sided Welch t-test of mean(first) > mean(second) (unequal variances)."""
    first, second = _samples(first, second, 2)
    result = sps.ttest_ind(first, second, equal_var=False, alternative="greater")
    difference = float(first.mean() - second.mean())
    pooled = math.sqrt(((first.size - 1) * first.var(ddof=1) + (second.size - 1) * second.var(ddof=1))
                       / (first.size + second.size - 2))
    d = difference / pooled if pooled > 0 else math.nan
    return WelchTest(float(result.statistic), float(result.df), float(result.pvalue), difference, d,
                     int(first.size), int(second.size))


def rank_greater(first, second) -> RankTest:
    """One-sided Mann-Whitney test that values of ``first`` tend to exceed those of ``second``
    (SciPy's exact or normal-approximation p with ties corrected, as its ``method="auto"`` picks)."""
    first, second = _samples(first, second, 1)
    result = sps.mannwhitneyu(first, second, alternative="greater")
    return RankTest(float(result.statistic) / (first.size * second.size), float(result.pvalue),
                    int(first.size), int(second.size))


def _samples(first, second, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    first, second = (np.asarray(values, dtype=np.float64) for values in (first, second))
    if first.size < minimum or second.size < minimum:
        raise ValueError(f"a two-sample test needs at least {minimum} value(s) per sample, got {first.size} and {second.size}")
    if not (np.isfinite(first).all() and np.isfinite(second).all()):
        raise ValueError("a two-sample test got a NaN or infinite value")
    return first, second
