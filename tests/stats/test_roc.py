"""ROC statistics of membership scores against scikit-learn, SciPy and hand computation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import roc_auc_score, roc_curve

from medexp.stats.roc import auc_bootstrap_ci, auc_permutation_test, mean_auc, tpr_at_fpr, youden_point

# members score 10, 9, 1; non-members 8, 2, 0 (hand-computed values below)
HAND_LABELS = np.array([1, 1, 1, 0, 0, 0], dtype=bool)
HAND_SCORES = np.array([10.0, 9.0, 1.0, 8.0, 2.0, 0.0])


def test_auc_matches_scikit_learn_with_ties_and_over_rows():
    rng = np.random.default_rng(0)
    labels = rng.random(300) < 0.4
    scores = np.round(rng.normal(size=(3, 300)) + labels, 1)  # rounding makes ties
    for row in scores:
        assert mean_auc(labels, row) == pytest.approx(roc_auc_score(labels, row), abs=1e-12)
    assert mean_auc(labels, scores) == pytest.approx(np.mean([roc_auc_score(labels, row) for row in scores]), abs=1e-12)


def test_auc_by_hand():
    # pairs (member > non-member): 10 beats 3, 9 beats 3, 1 beats 1 (0): 7 of 9
    assert mean_auc(HAND_LABELS, HAND_SCORES) == pytest.approx(7 / 9)


def test_tpr_at_fpr_by_hand_and_against_roc_curve():
    # no false positive allowed: only scores above 8 are called members -> TPR 2/3
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 0.0) == pytest.approx(2 / 3)
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 0.01) == pytest.approx(2 / 3)  # below the 1/3 FPR step
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 1 / 3) == pytest.approx(2 / 3)
    assert tpr_at_fpr(HAND_LABELS, HAND_SCORES, 2 / 3) == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    labels = rng.random(500) < 0.5
    scores = rng.normal(size=500) + 0.8 * labels
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    for target in (0.001, 0.01, 0.1):
        assert tpr_at_fpr(labels, scores, target) == pytest.approx(tpr[fpr <= target].max())


def test_youden_point_by_hand():
    point = youden_point(HAND_LABELS, HAND_SCORES)
    # thresholds 9 -> (TPR 2/3, FPR 0), J = 2/3; threshold 1 -> (1, 2/3), J = 1/3: best is 9
    assert point.threshold == 9.0
    assert (point.tpr, point.fpr) == (pytest.approx(2 / 3), 0.0)
    assert point.accuracy == pytest.approx(5 / 6)  # 10, 9 called members; 1 missed


def test_permutation_test_is_exact_mann_whitney_when_every_relabelling_is_drawn():
    # 3 + 3 examples have 20 relabellings; SciPy enumerates them all when asked for more draws
    result = auc_permutation_test(HAND_LABELS, HAND_SCORES, n_permutations=1000, seed=0)
    exact = sps.mannwhitneyu(HAND_SCORES[HAND_LABELS], HAND_SCORES[~HAND_LABELS], alternative="greater",
                             method="exact").pvalue
    assert result.auc == pytest.approx(7 / 9)
    assert result.p_value == pytest.approx(exact)


def test_permutation_p_value_follows_the_plus_one_convention():
    labels = np.array([True] * 30 + [False] * 30)
    scores = np.arange(60, 0, -1, dtype=float)  # every member above every non-member
    result = auc_permutation_test(labels, scores, n_permutations=999, seed=0)
    assert result.auc == 1.0 and result.p_value == pytest.approx(1 / 1000)
    assert result.n_permutations == 999


def test_permutation_test_of_several_rows_tests_their_mean_auc():
    rng = np.random.default_rng(2)
    labels = rng.random(200) < 0.5
    scores = rng.normal(size=(4, 200)) + 0.3 * labels
    result = auc_permutation_test(labels, scores, n_permutations=200, seed=1)
    assert result.auc == pytest.approx(mean_auc(labels, scores))
    assert auc_permutation_test(labels, scores, 200, seed=1) == result  # seeded: identical


def test_null_p_values_are_uniform():
    """Members and non-members from one distribution: the rejection rate at 0.05 is 0.05."""
    p_values = []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        labels = rng.permutation(np.r_[np.ones(40, bool), np.zeros(60, bool)])
        scores = rng.normal(size=(2, 100))
        p_values.append(auc_permutation_test(labels, scores, n_permutations=199, seed=seed).p_value)
    p_values = np.asarray(p_values)
    rejections = int(np.sum(p_values <= 0.05))
    assert sps.binomtest(rejections, 300, 0.05).pvalue > 0.001, rejections
    assert sps.kstest(p_values, "uniform").pvalue > 0.001


def test_power_planted_members_are_detected():
    rng = np.random.default_rng(3)
    labels = rng.random(200) < 0.5
    scores = rng.normal(size=200) + 1.0 * labels
    result = auc_permutation_test(labels, scores, n_permutations=999, seed=0)
    assert result.auc > 0.7 and result.p_value == pytest.approx(1 / 1000)


def test_bootstrap_interval_brackets_the_auc_and_is_seeded():
    rng = np.random.default_rng(4)
    labels = rng.random(300) < 0.5
    scores = rng.normal(size=(2, 300)) + 0.5 * labels
    auc = mean_auc(labels, scores)
    low, high = auc_bootstrap_ci(labels, scores, n_resamples=500, level=0.95, seed=0)
    assert low < auc < high and 0.05 < high - low < 0.25
    assert auc_bootstrap_ci(labels, scores, 500, 0.95, seed=0) == (low, high)
    # a stratified bootstrap of a perfect separation stays perfect
    assert auc_bootstrap_ci(HAND_LABELS, np.array([6.0, 5, 4, 3, 2, 1]), 200, 0.95, seed=0) == (1.0, 1.0)


def test_bootstrap_interval_covers_the_true_auc():
    """Coverage over repeated samples of a known AUC (normal scores, shift d: AUC = Phi(d / sqrt 2))."""
    truth = sps.norm.cdf(0.5 / np.sqrt(2))
    covered = 0
    for seed in range(60):
        rng = np.random.default_rng(100 + seed)
        labels = np.r_[np.ones(100, bool), np.zeros(100, bool)]
        scores = rng.normal(size=200) + 0.5 * labels
        low, high = auc_bootstrap_ci(labels, scores, n_resamples=300, level=0.9, seed=seed)
        covered += low <= truth <= high
    assert covered >= 46  # 0.9 nominal: 54 expected; binomial 1st percentile ~47


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="members and non-members"):
        mean_auc([True, True], [0.1, 0.2])
    with pytest.raises(ValueError, match="NaN or infinite"):
        mean_auc([True, False], [np.nan, 0.2])
    with pytest.raises(ValueError, match="do not match"):
        mean_auc([True, False, True], [0.1, 0.2])
