"""medexp.stats.two_sample: Welch's t and the Mann-Whitney AUC by hand, and refused inputs."""

from __future__ import annotations

import math

import pytest
from scipy import stats as sps

from medexp.stats.two_sample import rank_greater, welch_greater


def test_welch_by_hand():
    # first: mean 2.5, variance 5/3; second: mean 1, variance 1
    # se^2 = (5/3)/4 + 1/3 = 0.75, t = 1.5 / sqrt(0.75) = sqrt(3)
    # df = 0.75^2 / ((5/12)^2 / 3 + (1/3)^2 / 2) = 0.5625 / (0.0578704 + 0.0555556) = 4.959184
    # pooled SD = sqrt((3 * 5/3 + 2 * 1) / 5) = sqrt(1.4), d = 1.5 / 1.183216 = 1.267731
    test = welch_greater([1, 2, 3, 4], [0, 1, 2])
    assert test.t == pytest.approx(math.sqrt(3))
    assert test.df == pytest.approx(4.959184, abs=1e-6)
    assert test.p_value == pytest.approx(sps.t.sf(math.sqrt(3), 4.959184), rel=1e-6)
    assert 0.05 < test.p_value < 0.1  # t = 1.73 on 5 degrees of freedom: about 0.072
    assert test.mean_difference == pytest.approx(1.5) and test.cohens_d == pytest.approx(1.267731, abs=1e-6)
    assert (test.n_first, test.n_second) == (4, 3)
    # the other way round the same t is negative and p is its complement
    reverse = welch_greater([0, 1, 2], [1, 2, 3, 4])
    assert reverse.t == pytest.approx(-test.t) and reverse.p_value == pytest.approx(1 - test.p_value)


def test_rank_auc_by_hand():
    # pairs (12): 1 beats 0, ties 1 -> 1.5; 2 beats 0, 1, ties 2 -> 2.5; 3 and 4 beat all three -> 6; 10 / 12
    test = rank_greater([1, 2, 3, 4], [0, 1, 2])
    assert test.auc == pytest.approx(10 / 12)
    assert test.p_value == pytest.approx(sps.mannwhitneyu([1, 2, 3, 4], [0, 1, 2], alternative="greater").pvalue)


def test_too_few_or_non_finite_values_are_refused():
    with pytest.raises(ValueError, match="at least 2 value"):
        welch_greater([1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="NaN or infinite"):
        rank_greater([1.0, math.nan], [0.0])
