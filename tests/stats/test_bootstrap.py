"""The case-clustered bootstrap: multiplicities, intervals, per-cell streams, paired differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from medexp.stats.bootstrap import (
    cluster_bootstrap,
    cluster_multiplicities,
    pair_seed,
    paired_cluster_bootstrap,
    percentile_interval,
)


def _mean_statistic(summed):
    return {"mean": summed[:, 1] / summed[:, 0]}


def test_multiplicities_draw_n_clusters_per_resample_and_are_seeded():
    weights = cluster_multiplicities(7, 300, seed=5)
    assert weights.shape == (300, 7) and np.all(weights.sum(axis=1) == 7) and weights.min() >= 0
    assert np.array_equal(weights, cluster_multiplicities(7, 300, seed=5))
    assert not np.array_equal(weights, cluster_multiplicities(7, 300, seed=6))
    assert weights.mean() == pytest.approx(1.0)
    assert (weights == 0).mean() == pytest.approx((6 / 7) ** 7, abs=0.03)  # P(a case is never drawn)


def test_a_cluster_moves_as_a_whole():
    """A resample's statistic sees each drawn case with all its probes: here a case is all-or-nothing."""
    # case 0: 3 probes all correct; case 1: 1 probe wrong; case 2: 2 probes, none correct
    totals = np.array([[3.0, 3.0], [1.0, 0.0], [2.0, 0.0]])
    calls = []

    def statistic(summed):
        calls.append(summed)
        return _mean_statistic(summed)

    cluster_bootstrap(totals, statistic, n_resamples=200, seed=0)
    summed = calls[-1]  # the resamples (the first call is the point estimate)
    assert summed.shape == (200, 2)
    # correct answers come only from case 0, in blocks of 3: a resample never splits a case
    assert np.all(summed[:, 1] % 3 == 0)
    assert set(np.unique(summed[:, 0])) <= {float(n) for n in range(3, 10)}


def test_interval_of_a_mean_matches_the_normal_approximation():
    rng = np.random.default_rng(1)
    values = rng.normal(10.0, 2.0, 400)
    totals = np.column_stack([np.ones_like(values), values])
    interval = cluster_bootstrap(totals, _mean_statistic, n_resamples=2000, seed=3)["mean"]
    half = 1.96 * values.std(ddof=1) / math.sqrt(values.size)
    assert interval.estimate == pytest.approx(values.mean())
    assert interval.low == pytest.approx(values.mean() - half, abs=0.05)
    assert interval.high == pytest.approx(values.mean() + half, abs=0.05)
    assert interval.n_valid == 2000


def test_undefined_resamples_are_left_out_and_counted():
    replicates = np.array([1.0, np.nan, 3.0, 2.0])
    interval = percentile_interval(2.0, replicates, confidence=0.5)
    assert interval.n_valid == 3 and interval.n_resamples == 4
    assert (interval.low, interval.high) == pytest.approx((1.5, 2.5))
    unreached = percentile_interval(8.0, np.array([8.0, np.inf, np.inf, 16.0]), confidence=0.5)
    assert unreached.low == 8.0 and unreached.high == np.inf  # order statistics, not inf - inf


def test_per_cell_streams_do_not_depend_on_other_cells():
    rng = np.random.default_rng(2)
    model_a = np.column_stack([np.ones(50), rng.random(50) < 0.7])
    model_b = np.column_stack([np.ones(50), rng.random(50) < 0.4])
    seed_a, seed_b = 1001, 2002  # what each cell derives from its own key
    alone = cluster_bootstrap(model_a, _mean_statistic, seed=seed_a)["mean"]
    cluster_bootstrap(model_b, _mean_statistic, seed=seed_b)  # another model run first
    after = cluster_bootstrap(model_a, _mean_statistic, seed=seed_a)["mean"]
    assert (alone.low, alone.high) == (after.low, after.high)
    # the harness's scheme, one stream for all models in turn, does depend on the others
    shared = np.random.default_rng(7)
    first_alone = _shared_stream_interval(model_a, np.random.default_rng(7))
    _shared_stream_interval(model_b, shared)
    second = _shared_stream_interval(model_a, shared)
    assert first_alone != second


def _shared_stream_interval(totals, rng):
    draws = rng.integers(0, len(totals), size=(500, len(totals)))
    means = totals[draws, 1].sum(axis=1) / totals[draws, 0].sum(axis=1)
    return tuple(np.quantile(means, [0.025, 0.975]))


def test_pair_seed_is_symmetric_and_ignores_other_cells():
    assert pair_seed(0, "model=a", "model=b") == pair_seed(0, "model=b", "model=a")
    assert pair_seed(0, "model=a", "model=b") != pair_seed(0, "model=a", "model=c")
    assert pair_seed(0, "model=a", "model=b") != pair_seed(1, "model=a", "model=b")


def test_paired_difference_of_identical_tables_is_zero_with_p_one():
    rng = np.random.default_rng(4)
    totals = np.column_stack([np.full(80, 3.0), rng.integers(0, 4, 80)])
    result = paired_cluster_bootstrap(totals, totals.copy(), _mean_statistic, seed=9)["mean"]
    assert result.estimate == 0.0 and result.low == 0.0 and result.high == 0.0 and result.p_value == 1.0


def test_paired_difference_detects_a_shift_and_pairing_narrows_the_interval():
    rng = np.random.default_rng(5)
    difficulty = rng.normal(0.5, 0.2, 200)
    a = np.column_stack([np.ones(200), difficulty + 0.05 + rng.normal(0, 0.02, 200)])
    b = np.column_stack([np.ones(200), difficulty + rng.normal(0, 0.02, 200)])
    paired = paired_cluster_bootstrap(a, b, _mean_statistic, seed=1)["mean"]
    assert paired.estimate == pytest.approx(0.05, abs=0.01)
    assert paired.low > 0 and paired.p_value == pytest.approx(2 / 501)
    # the same difference from independent resampling of the two tables is far wider
    ia = cluster_bootstrap(a, _mean_statistic, seed=1)["mean"]
    ib = cluster_bootstrap(b, _mean_statistic, seed=2)["mean"]
    assert (paired.high - paired.low) < 0.5 * ((ia.high - ia.low) + (ib.high - ib.low)) / 2


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="same shape"):
        paired_cluster_bootstrap(np.ones((3, 2)), np.ones((4, 2)), _mean_statistic)
    with pytest.raises(ValueError, match="at least one cluster"):
        cluster_multiplicities(0, 10, 0)
