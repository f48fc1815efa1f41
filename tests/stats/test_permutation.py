"""Statistics behind exch and exch_rank, against brute force and hand computation."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats import rank_exchangeability, shard_exchangeability_test


def _exact_rank_p(loglik):
    """P(T(pi) >= T(observed)) over all n! orders, by enumeration."""
    n = len(loglik)
    ranks = sps.rankdata(loglik)
    earliness = np.arange(n - 1, -1, -1)
    observed = ranks @ earliness
    hits = sum(ranks[list(order)] @ earliness >= observed - 1e-9 for order in itertools.permutations(range(n)))
    return hits / math.factorial(n)


@pytest.mark.parametrize("loglik", [[-3.0, -1.0, -2.0, -5.0, -4.0, -6.0, -0.5], [-1.0, -1.0, -2.0, -2.0, -3.0, -0.5, -4.0]])
def test_rank_p_value_matches_enumeration(loglik):
    exact = _exact_rank_p(loglik)
    result = rank_exchangeability(loglik, n_permutations=40_000, seed=3)
    standard_error = math.sqrt(exact * (1 - exact) / 40_000)
    assert abs(result.p_value - exact) < 4 * standard_error + 1 / 40_001


def test_rank_statistic_is_spearman_of_earliness():
    rng = np.random.default_rng(0)
    loglik = rng.normal(size=50)
    result = rank_exchangeability(loglik, n_permutations=10, seed=0)
    expected = sps.spearmanr(np.arange(50)[::-1], loglik).statistic
    assert result.statistic == pytest.approx(expected, abs=1e-12)


def test_rank_p_value_convention_and_floor():
    # Strictly decreasing log-likelihood: the observed order is the most extreme possible.
    result = rank_exchangeability(-np.arange(200.0), n_permutations=999, seed=1)
    assert result.n_exceed == 0
    assert result.p_value == pytest.approx(1 / 1000)
    assert result.statistic == pytest.approx(1.0)


def test_rank_is_deterministic_in_seed():
    loglik = np.random.default_rng(5).normal(size=300)
    a = rank_exchangeability(loglik, n_permutations=2000, seed=11)
    b = rank_exchangeability(loglik, n_permutations=2000, seed=11)
    c = rank_exchangeability(loglik, n_permutations=2000, seed=12)
    assert a == b
    assert a.n_exceed != c.n_exceed or a.null_mean != c.null_mean


def test_rank_null_false_positive_rate_near_alpha():
    """Exchangeable scores: p < 0.05 in about 5% of 400 independent data sets."""
    rng = np.random.default_rng(2024)
    p_values = np.array(
        [rank_exchangeability(rng.normal(size=100), n_permutations=400, seed=s).p_value for s in range(400)]
    )
    rate = np.mean(p_values < 0.05)
    assert 0.02 <= rate <= 0.085
    assert sps.kstest(p_values, "uniform").pvalue > 0.001


def test_rank_detects_planted_order_effect():
    """Earlier examples 0.5 sd more likely on a linear ramp: detected at the floor."""
    rng = np.random.default_rng(1)
    n = 400
    loglik = rng.normal(size=n) + np.linspace(0.5, -0.5, n)
    assert rank_exchangeability(loglik, n_permutations=2000, seed=0).p_value < 0.01


def test_rank_rejects_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        rank_exchangeability([0.0, np.nan, 1.0, 2.0])
    with pytest.raises(ValueError, match=">= 3"):
        rank_exchangeability([1.0, 2.0])


def test_shard_test_matches_hand_computed_t():
    canonical = np.array([-10.0, -12.0, -9.0, -11.0])
    permuted = np.array([[-11.0, -12.0], [-12.5, -13.5], [-9.0, -10.0], [-10.0, -12.0]])
    # d = canonical - row means = [1.5, 1.0, 0.5, 0.0]; mean 0.75, sd sqrt(5/12)
    d = np.array([1.5, 1.0, 0.5, 0.0])
    t_hand = 0.75 / (math.sqrt(((d - 0.75) ** 2).sum() / 3) / 2)
    assert t_hand == pytest.approx(0.75 / (math.sqrt(5 / 12) / 2))
    result = shard_exchangeability_test(canonical, permuted)
    assert result.statistic == pytest.approx(t_hand, rel=1e-12)
    assert result.p_value == pytest.approx(sps.t.sf(t_hand, df=3), rel=1e-12)
    np.testing.assert_allclose(result.shard_differences, d)


def test_shard_test_null_rate_and_power():
    rng = np.random.default_rng(7)
    null_p = []
    for _ in range(500):
        scores = rng.normal(size=(30, 21))  # column 0 exchangeable with the others
        null_p.append(shard_exchangeability_test(scores[:, 0], scores[:, 1:]).p_value)
    assert 0.025 <= np.mean(np.array(null_p) < 0.05) <= 0.08
    scores = rng.normal(size=(30, 21))
    scores[:, 0] += 1.0  # order under test 1 nat more likely in every shard
    assert shard_exchangeability_test(scores[:, 0], scores[:, 1:]).p_value < 1e-4


def test_shard_test_rejects_degenerate_input():
    with pytest.raises(ValueError, match="identical"):
        shard_exchangeability_test(np.zeros(5), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="shape"):
        shard_exchangeability_test(np.zeros(5), np.zeros((4, 3)))
