"""Mean intervals, the sign test, correlations and the mean-difference permutation test."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats.summaries import mean_ci, mean_difference_test, sign_test, spearman, within_group


def test_mean_ci_brackets_the_mean_and_degenerates_cleanly():
    rng = np.random.default_rng(0)
    values = rng.normal(1.0, 1.0, size=80)
    interval = mean_ci(values, 1000, 0.95, seed=0)
    assert interval.mean == pytest.approx(values.mean())
    assert interval.low < interval.mean < interval.high
    # roughly mean +- 1.96 sd / sqrt(n)
    half = 1.96 * values.std(ddof=1) / np.sqrt(80)
    assert interval.high - interval.low == pytest.approx(2 * half, rel=0.25)
    assert mean_ci(values, 1000, 0.95, seed=0) == interval
    one = mean_ci([0.4], 100, 0.95, seed=0)
    assert one.mean == 0.4 and np.isnan(one.low) and np.isnan(one.high)
    constant = mean_ci([0.2, 0.2, 0.2], 100, 0.95, seed=0)
    assert [constant.mean, constant.low, constant.high] == pytest.approx([0.2, 0.2, 0.2])


def test_sign_test_by_hand():
    # 5 positive, 0 negative, one zero dropped: two-sided p = 2 / 2^5
    result = sign_test([0.3, 0.1, 2.0, 0.5, 0.01, 0.0])
    assert (result.n_positive, result.n_negative) == (5, 0)
    assert result.p_value == pytest.approx(2 / 32)
    assert sign_test([1, -1, 2, -2]).p_value == pytest.approx(1.0)
    assert sign_test([0, 0]).p_value == 1.0


def test_spearman_is_scipy_and_nan_when_undefined():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=40), rng.normal(size=40)
    result = spearman(x, y)
    reference = sps.spearmanr(x, y)
    assert (result.rho, result.p_value) == (pytest.approx(reference.statistic), pytest.approx(reference.pvalue))
    assert np.isnan(spearman([1, 1, 1, 1], [1, 2, 3, 4]).rho)
    assert np.isnan(spearman([1, 2], [2, 1]).rho)


def test_within_group_removes_each_group_mean():
    values = np.array([1.0, 3.0, 10.0, 14.0, 5.0])
    groups = np.array(["a", "a", "b", "b", "c"])
    assert within_group(values, groups).tolist() == [-1.0, 1.0, -2.0, 2.0, 0.0]


def test_mean_difference_test_is_exact_when_every_relabelling_is_drawn():
    first, second = np.array([3.0, 5.0, 4.0]), np.array([1.0, 2.0, 3.5])
    pooled = np.r_[first, second]
    observed = first.mean() - second.mean()
    splits = [np.array(chosen) for chosen in itertools.combinations(range(6), 3)]
    exact = np.mean([pooled[c].mean() - np.delete(pooled, c).mean() >= observed - 1e-12 for c in splits])
    result = mean_difference_test(first, second, n_permutations=1000, seed=0)
    assert result.statistic == pytest.approx(observed)
    assert result.p_value == pytest.approx(exact)


def test_mean_difference_null_rejects_at_alpha_and_power_detects():
    p_values = [mean_difference_test(*np.random.default_rng(seed).normal(size=(2, 50)), 199, seed).p_value
                for seed in range(300)]
    rejections = int(np.sum(np.asarray(p_values) <= 0.05))
    assert sps.binomtest(rejections, 300, 0.05).pvalue > 0.001, rejections
    rng = np.random.default_rng(7)
    planted = mean_difference_test(rng.normal(1.2, 1, 50), rng.normal(0, 1, 50), 999, seed=0)
    assert planted.p_value < 0.01
