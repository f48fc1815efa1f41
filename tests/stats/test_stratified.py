"""medexp.stats.stratified: the Mantel-Haenszel risk difference and Sato's interval by hand, the
exact conditional test against Fisher's test and against enumerating every within-stratum
relabelling of a tiny case."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats.stratified import exact_stratified_greater, mantel_haenszel_difference


def test_the_mh_difference_by_hand():
    # stratum 1: 3 of 4 against 1 of 4, w = 4 * 4 / 8 = 2, difference 0.5;
    # stratum 2: 2 of 2 against 1 of 3, w = 2 * 3 / 5 = 1.2, difference 2/3;
    # RD = (2 * 0.5 + 1.2 * 2/3) / 3.2 = 1.8 / 3.2 = 0.5625
    result = mantel_haenszel_difference([3, 2], [4, 2], [1, 1], [4, 3])
    assert result.estimate == pytest.approx(0.5625) and result.n_strata == 2
    # Sato: P = sum (n1^2 c - n0^2 a + n1 n0 (n0 - n1) / 2) / N^2 = (16 - 48 + 0) / 64 + (4 - 18 + 3) / 25 = -0.94
    #       Q = sum (a (n0 - c) + c (n1 - a)) / (2 N) = (9 + 1) / 16 + (4 + 0) / 10 = 1.025
    #       Var = (0.5625 * -0.94 + 1.025) / 3.2^2 = 0.49625 / 10.24
    assert result.variance == pytest.approx(0.49625 / 10.24)
    half = 1.959964 * math.sqrt(0.49625 / 10.24)
    assert (result.low, result.high) == pytest.approx((0.5625 - half, 0.5625 + half), abs=1e-6)


def test_with_one_stratum_it_is_the_rate_difference_with_the_unpooled_wald_interval():
    result = mantel_haenszel_difference([30], [50], [12], [40], confidence=0.9)
    assert result.estimate == pytest.approx(30 / 50 - 12 / 40)
    assert result.variance == pytest.approx(0.6 * 0.4 / 50 + 0.3 * 0.7 / 40)
    assert result.high - result.estimate == pytest.approx(sps.norm.ppf(0.95) * math.sqrt(result.variance))


def test_with_one_stratum_the_exact_test_is_fishers():
    for table in ([[7, 3], [2, 8]], [[1, 9], [1, 9]], [[0, 5], [4, 1]], [[40, 60], [25, 75]]):
        (a, b), (c, d) = table
        expected = sps.fisher_exact(table, alternative="greater").pvalue
        assert exact_stratified_greater([a], [a + b], [c], [c + d]) == pytest.approx(expected, rel=1e-12)


def test_a_tiny_case_against_every_within_stratum_relabelling():
    # stratum 1: audited events [1, 1, 0], control [0, 1]; stratum 2: audited [1], control [0, 0]
    strata = [([1, 1, 0], [0, 1]), ([1], [0, 0])]
    observed = sum(sum(audited) for audited, _ in strata)
    totals = []
    for labelling in itertools.product(*(itertools.combinations(range(len(a) + len(c)), len(a)) for a, c in strata)):
        total = 0
        for (audited, control), chosen in zip(strata, labelling):
            pooled = audited + control
            total += sum(pooled[index] for index in chosen)
        totals.append(total)
    # 10 labellings of stratum 1 times 3 of stratum 2: stratum 1 puts its 3 events on the audited
    # side in 1 labelling and 2 of them in 6; stratum 2 its event in 1: (1 * 3 + 6 * 1) / 30
    enumerated = float(np.mean(np.array(totals) >= observed))
    assert enumerated == pytest.approx(9 / 30)
    p_value = exact_stratified_greater([2, 1], [3, 1], [1, 0], [2, 2])
    assert p_value == pytest.approx(enumerated)


def test_no_events_and_all_events_give_p_one():
    assert exact_stratified_greater([0, 0], [5, 3], [0, 0], [4, 2]) == pytest.approx(1.0)
    assert exact_stratified_greater([5], [5], [4], [4]) == pytest.approx(1.0)


def test_a_strong_difference_gives_a_tiny_p_without_a_floor():
    p_value = exact_stratified_greater([200, 150], [200, 150], [0, 0], [200, 150])
    assert 0 < p_value < 1e-100


@pytest.mark.parametrize("counts, message", [
    (([1], [2], [1], [0]), "units of both groups"),
    (([3], [2], [1], [2]), "between 0 and their group's size"),
    (([1, 1], [2], [1], [2]), "four counts"),
    (([], [], [], []), "no stratum"),
])
def test_bad_counts_are_refused(counts, message):
    with pytest.raises(ValueError, match=message):
        exact_stratified_greater(*counts)
    with pytest.raises(ValueError, match=message):
        mantel_haenszel_difference(*counts)
