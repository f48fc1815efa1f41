"""The within-case swap test of two models: null level, ties, power."""

from __future__ import annotations

import numpy as np
import pytest

from medexp.stats.paired_swap import paired_swap_test


def _accuracy(summed):
    return {"acc": summed[:, 1] / summed[:, 0]}


def test_identical_models_give_p_one():
    totals = np.column_stack([np.full(40, 4.0), np.random.default_rng(0).integers(0, 5, 40)])
    result = paired_swap_test(totals, totals.copy(), _accuracy, n_permutations=300, seed=1)["acc"]
    assert result.statistic == 0.0 and result.p_value == 1.0 and result.n_exceed == 300


def test_level_under_exchangeable_models():
    """500 null replicates of 60 heterogeneous cases: rejections at 0.05 within binomial noise."""
    rejections = 0
    for replicate in range(500):
        rng = np.random.default_rng(replicate)
        p = np.clip(rng.normal(0.6, 0.2, 60), 0.05, 0.95)
        a = np.column_stack([np.full(60, 5.0), rng.binomial(5, p)])
        b = np.column_stack([np.full(60, 5.0), rng.binomial(5, p)])
        rejections += paired_swap_test(a, b, _accuracy, n_permutations=199, seed=replicate)["acc"].p_value < 0.05
    assert 0.025 <= rejections / 500 <= 0.08


def test_power_against_a_shift():
    rng = np.random.default_rng(3)
    p = np.clip(rng.normal(0.5, 0.2, 100), 0.05, 0.85)
    a = np.column_stack([np.full(100, 5.0), rng.binomial(5, p + 0.1)])
    b = np.column_stack([np.full(100, 5.0), rng.binomial(5, p)])
    result = paired_swap_test(a, b, _accuracy, n_permutations=999, seed=4)["acc"]
    assert result.statistic > 0.05 and result.p_value < 0.01


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="one shape"):
        paired_swap_test(np.ones((3, 2)), np.ones((2, 2)), _accuracy)
