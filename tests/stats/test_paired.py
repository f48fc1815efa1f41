"""Paired and chance tests against hand values and brute-force enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats.paired import (
    accuracy_above_chance,
    accuracy_above_chances,
    discordant,
    mcnemar_exact,
    paired_mcnemar,
    poisson_binomial_pmf,
    poisson_binomial_sf,
    relabel_test,
    wilson_interval,
)


def test_mcnemar_by_hand():
    # b = 8, c = 2: P(Bin(10, 1/2) >= 8) = (45 + 10 + 1) / 1024
    assert mcnemar_exact(8, 2, "greater").p_value == pytest.approx(56 / 1024)
    assert mcnemar_exact(8, 2, "two-sided").p_value == pytest.approx(112 / 1024)
    assert mcnemar_exact(8, 2, "less").p_value == pytest.approx(1 - 11 / 1024)
    assert mcnemar_exact(2, 8, "greater").p_value == pytest.approx(1 - 11 / 1024)
    assert mcnemar_exact(0, 0).p_value == 1.0
    assert mcnemar_exact(5, 0, "greater").p_value == pytest.approx(1 / 32)
    with pytest.raises(ValueError, match="alternative"):
        mcnemar_exact(1, 1, "bigger")


def test_paired_mcnemar_counts_only_discordant_items():
    first = [True, True, True, False, False, True]
    second = [False, False, True, True, False, True]
    assert discordant(first, second) == (2, 1)
    result = paired_mcnemar(first, second)
    assert (result.b, result.c, result.n_discordant) == (2, 1, 3)
    assert result.p_value == pytest.approx(4 / 8)  # P(Bin(3, 1/2) >= 2)


def test_wilson_interval_by_hand():
    k, n, z = 8, 10, sps.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    interval = wilson_interval(k, n)
    assert (interval.estimate, interval.low, interval.high) == pytest.approx((0.8, centre - half, centre + half))
    assert math.isnan(wilson_interval(0, 0).estimate)
    assert wilson_interval(0, 5).low == pytest.approx(0.0, abs=1e-12)


def test_binomial_against_chance_by_hand():
    # k = 5 of n = 10 at chance 1/4
    expected = sum(math.comb(10, j) * 0.25 ** j * 0.75 ** (10 - j) for j in range(5, 11))
    test = accuracy_above_chance(5, 10, 0.25)
    assert test.p_value == pytest.approx(expected)
    assert test.expected == pytest.approx(2.5)


def test_poisson_binomial_by_hand_and_by_enumeration():
    assert poisson_binomial_sf(1, [0.5, 0.25]) == pytest.approx(1 - 0.5 * 0.75)
    assert poisson_binomial_sf(2, [0.5, 0.25]) == pytest.approx(0.125)
    assert poisson_binomial_sf(0, [0.5, 0.25]) == 1.0 and poisson_binomial_sf(3, [0.5, 0.25]) == 0.0
    probabilities = np.random.default_rng(3).uniform(0, 1, size=9)
    brute = np.zeros(10)
    for outcome in itertools.product((0, 1), repeat=9):
        outcome = np.array(outcome)
        brute[outcome.sum()] += np.prod(np.where(outcome == 1, probabilities, 1 - probabilities))
    assert poisson_binomial_pmf(probabilities) == pytest.approx(brute, abs=1e-12)
    for k in range(11):
        assert poisson_binomial_sf(k, probabilities) == pytest.approx(brute[k:].sum(), abs=1e-12)


def test_equal_rates_reduce_to_the_binomial_test():
    correct = np.array([True] * 9 + [False] * 11)
    mixed = accuracy_above_chances(correct, np.full(20, 1 / 3))
    assert mixed.p_value == pytest.approx(sps.binomtest(9, 20, 1 / 3, alternative="greater").pvalue)
    assert mixed.expected == pytest.approx(20 / 3)
    with pytest.raises(ValueError, match="one chance rate per item"):
        accuracy_above_chances(correct, np.full(19, 0.5))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        poisson_binomial_pmf([0.5, 1.5])


def _exact_relabel_p(original, perturbed):
    """The exact one-sided p of the relabelling test: every choice of which probe is the original."""
    probes = [np.concatenate([[x], np.asarray(y, dtype=float)]) for x, y in zip(original, perturbed)]

    def statistic(picks):
        return np.mean([(len(values) * values[pick] - values.sum()) / (len(values) - 1)
                        for values, pick in zip(probes, picks)])

    observed = statistic([0] * len(probes))
    draws = [statistic(picks) for picks in itertools.product(*(range(len(values)) for values in probes))]
    return float(np.mean(np.array(draws) >= observed - 1e-12))


def test_relabel_test_matches_exact_enumeration():
    original = [1, 1, 1, 0, 1, 1]
    perturbed = [[0, 0], [1, 0], [0, 1, 0], [1, 1], [0], [1, 0, 0]]
    exact = _exact_relabel_p(original, perturbed)
    result = relabel_test(original, perturbed, 20000, seed=5)
    assert result.p_value == pytest.approx(exact, abs=0.01)
    assert result.statistic == pytest.approx(np.mean([1, 0.5, 2 / 3, -1, 1, 2 / 3]))
    assert relabel_test(original, perturbed, 2000, seed=5).p_value == relabel_test(original, perturbed, 2000, 5).p_value


def test_relabel_with_one_perturbed_probe_approximates_mcnemar():
    rng = np.random.default_rng(0)
    first = rng.random(80) < 0.7
    second = rng.random(80) < 0.55
    exact = paired_mcnemar(first, second).p_value
    mc = relabel_test(first, [[value] for value in second], 40000, seed=1).p_value
    assert mc == pytest.approx(exact, abs=0.01)


def test_relabel_null_level_holds_with_several_variants():
    """Exchangeable probes (correctness independent of the arm): rejections at most alpha."""
    rejections, runs = 0, 300
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        ability = rng.uniform(0.3, 0.95, size=60)
        original = rng.random(60) < ability
        perturbed = [rng.random(3) < a for a in ability]
        rejections += relabel_test(original, perturbed, 499, seed=seed).p_value <= 0.05
    assert sps.binomtest(rejections, runs, 0.05, alternative="greater").pvalue > 0.001, rejections
    assert rejections > 0  # not degenerate: the test can reject
