"""Cohort statistics: deltas, the relabel permutation test and top-K overlap, by hand and by
enumeration."""

import itertools
import math

import numpy as np
import pytest

from medexp.stats import cohort_relabel_test, deltas_vs_cohort, top_k_indices, top_k_overlap
from medexp.stats.cohort import top_k_mask


def test_deltas_against_the_median_of_the_other_models():
    scores = [[1.0, 2.0, 3.0], [10.0, 0.0, 4.0]]
    # Row 0: 1 - median(2, 3), 2 - median(1, 3), 3 - median(1, 2); row 1 likewise.
    np.testing.assert_allclose(deltas_vs_cohort(scores), [[-1.5, 0.0, 1.5], [8.0, -7.0, -1.0]])
    # Four models: the medians of the other three are 5, 5, 1 and 1.
    np.testing.assert_allclose(deltas_vs_cohort([[0.0, 1.0, 5.0, 9.0]]), [[-5.0, -4.0, 4.0, 8.0]])


def test_deltas_need_three_models_and_finite_scores():
    with pytest.raises(ValueError, match="at least 3 cohort models"):
        deltas_vs_cohort([[1.0, 2.0]])
    with pytest.raises(ValueError, match="NaN or infinite"):
        deltas_vs_cohort([[1.0, 2.0, float("nan")]])


def _exact_relabel_p(contributions, target):
    """P(T(null) >= T(observed)) over all M^n relabelings, by enumeration."""
    matrix = np.asarray(contributions)
    n, m = matrix.shape
    observed = matrix[np.arange(n), target].sum()
    hits = sum(matrix[np.arange(n), list(cols)].sum() >= observed - 1e-12 for cols in itertools.product(range(m), repeat=n))
    return hits / m**n


@pytest.mark.parametrize("seed", [0, 1])
def test_relabel_p_value_matches_enumeration(seed):
    contributions = np.random.default_rng(seed).normal(size=(5, 3))
    exact = _exact_relabel_p(contributions, target=0)
    result = cohort_relabel_test(contributions, 0, n_permutations=40_000, seed=7)
    assert abs(result.p_value - exact) < 4 * math.sqrt(exact * (1 - exact) / 40_000) + 1 / 40_001
    assert result.statistic == pytest.approx(contributions[:, 0].mean())


def test_relabel_indicator_case_by_hand():
    # Two models, the target exceeds on all three examples, the other never: under the null each
    # example's model is a fair coin, so P(T >= 3) = 1/8.
    result = cohort_relabel_test([[1, 0], [1, 0], [1, 0]], 0, n_permutations=20_000, seed=0)
    assert result.statistic == 1.0
    assert abs(result.n_exceed / 20_000 - 1 / 8) < 4 * math.sqrt(1 / 8 * 7 / 8 / 20_000)
    assert result.p_value == (1 + result.n_exceed) / 20_001
    assert result.null_mean == pytest.approx(0.5, abs=0.01)


def test_relabel_is_deterministic_and_seeded():
    contributions = np.random.default_rng(3).normal(size=(50, 4))
    first = cohort_relabel_test(contributions, 2, 2_000, seed=11)
    assert first == cohort_relabel_test(contributions, 2, 2_000, seed=11)
    others = {cohort_relabel_test(contributions, 2, 2_000, seed=s).n_exceed for s in range(12, 16)}
    assert len(others | {first.n_exceed}) > 1


def test_relabel_rejects_bad_input():
    with pytest.raises(ValueError, match="target column 3"):
        cohort_relabel_test(np.zeros((4, 3)), 3)
    with pytest.raises(ValueError, match="n_permutations"):
        cohort_relabel_test(np.zeros((4, 3)), 0, n_permutations=0)
    with pytest.raises(ValueError, match="non-empty"):
        cohort_relabel_test(np.zeros((0, 3)), 0)


def test_top_k_ties_go_to_the_earlier_example():
    np.testing.assert_array_equal(top_k_indices([1.0, 3.0, 3.0, 2.0], 2), [1, 2])
    np.testing.assert_array_equal(top_k_indices([5.0, 5.0, 5.0], 2), [0, 1])
    np.testing.assert_array_equal(top_k_indices([2.0, 1.0, 2.0, 9.0, 2.0], 3), [0, 2, 3])
    with pytest.raises(ValueError, match="1 <= K <= number of examples"):
        top_k_indices([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="NaN or infinite"):
        top_k_indices([1.0, np.nan, 2.0], 1)


def test_top_k_mask_along_an_axis_is_top_k_indices_of_every_slice():
    """The relabel test ranks whole stacks of cohorts at once; each slice must get the set that
    top_k_indices gives it, ties included (scores on a coarse grid tie often)."""
    stack = np.random.default_rng(3).integers(0, 6, size=(4, 30, 5)).astype(float)
    mask = top_k_mask(stack, 7, axis=1)
    for block in range(stack.shape[0]):
        for column in range(stack.shape[2]):
            np.testing.assert_array_equal(np.flatnonzero(mask[block, :, column]),
                                          top_k_indices(stack[block, :, column], 7))
            # against the plain definition: a stable sort by descending score
            assert set(np.flatnonzero(mask[block, :, column])) == set(
                np.argsort(-stack[block, :, column], kind="stable")[:7].tolist())


def test_top_k_overlap_by_hand():
    overlap = top_k_overlap([0, 1, 2], [1, 2, 3], n_examples=10)
    assert overlap.intersection == 2
    assert overlap.jaccard == pytest.approx(2 / 4)
    assert overlap.expected == pytest.approx(9 / 10)
    assert overlap.lift == pytest.approx(2 / 0.9)
    # P[X >= 2], X ~ Hypergeometric(10, 3, 3): (C(3,2) C(7,1) + C(3,3)) / C(10,3) = 22/120.
    assert overlap.p_value == pytest.approx(22 / 120)
    assert top_k_overlap([0, 1], [2, 3], 10).p_value == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same size"):
        top_k_overlap([0, 1], [2], 10)
