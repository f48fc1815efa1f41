"""Detector memorization: M(x) against hand computation, the null and planted memorization."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from medexp.detectors import memorization_detector
from tests.detectors.differential_tables import drawn, losses, memorization_config

# two pairs, six examples: members ex0..ex3 (classes a, a, b, b), non-members ex4 (a), ex5 (b)
MEMBER = [True, True, True, True, False, False]
CLASSES = ["a", "a", "b", "b", "a", "b"]
CANDIDATE = [[0.1, 0.2, 1.0, 0.4, 1.0, 0.5],
             [0.3, 0.2, 0.8, 0.6, 1.2, 0.5]]
INDEPENDENT = [[0.9, 0.6, 1.0, 0.5, 1.1, 0.6],
               [0.7, 0.8, 1.2, 0.5, 1.1, 0.4]]
# M per pair: [0.8, 0.4, 0.0, 0.1, 0.1, 0.1] and [0.4, 0.6, 0.4, -0.1, -0.1, -0.1]
# mean M:     [0.6, 0.5, 0.2, 0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def hand():
    table = losses(MEMBER, CLASSES, CANDIDATE, INDEPENDENT)
    return table, memorization_detector(table, memorization_config(n_permutations=999, n_bootstrap=200), seed=0)


def test_m_and_its_summaries_by_hand(hand):
    _, result = hand
    per_example = result.extra_tables["per_example"].set_index("example_id")
    assert per_example["m"].tolist() == pytest.approx([0.6, 0.5, 0.2, 0.0, 0.0, 0.0])
    assert per_example["m_pair_0"].tolist() == pytest.approx([0.8, 0.4, 0.0, 0.1, 0.1, 0.1])
    assert per_example["m_pair_1"].tolist() == pytest.approx([0.4, 0.6, 0.4, -0.1, -0.1, -0.1])
    metrics = result.metrics
    assert metrics["m_mean_members"] == pytest.approx((0.6 + 0.5 + 0.2 + 0.0) / 4)
    assert metrics["m_mean_nonmembers"] == pytest.approx(0.0)
    assert metrics["statistic"] == pytest.approx(0.325)
    assert (metrics["n_members"], metrics["n_nonmembers"], metrics["n_pairs"]) == (4, 2, 2)


def test_classes_ranked_with_tiers_and_intervals(hand):
    _, result = hand
    classes = result.table
    assert classes["class"].tolist() == ["a", "b"]  # ranked by mean M: a 0.55, b 0.1
    assert classes["rank"].tolist() == [1, 2]
    assert classes["m_mean"].tolist() == pytest.approx([0.55, 0.1])
    assert classes["risk_tier"].tolist() == ["HIGH", "LOW"]  # 0.55 > 0.3; 0.1 <= 0.1
    assert classes["m_mean_nonmembers"].tolist() == pytest.approx([0.0, 0.0])
    assert classes["class_frequency"].tolist() == pytest.approx([0.5, 0.5])
    # two canaries per class: the bootstrap means lie between the two values
    assert classes.loc[0, "m_ci_low"] >= 0.5 - 1e-12 and classes.loc[0, "m_ci_high"] <= 0.6 + 1e-12
    assert "canary" in classes.loc[0, "ci_unit"]
    metrics = result.metrics
    assert metrics["worst_class_m"] == pytest.approx(0.55)
    assert (metrics["class_m.a"], metrics["class_m.b"]) == (pytest.approx(0.55), pytest.approx(0.1))
    assert (metrics["n_classes_high"], metrics["n_classes_moderate"], metrics["n_classes_low"]) == (1, 0, 1)


def test_the_p_value_is_the_exact_relabelling_test(hand):
    _, result = hand
    # 15 ways to pick 4 members of 6; mean M of members >= observed for: the observed split and
    # every split that swaps a 0.0 member with a 0.0 non-member (members {0.6, 0.5, 0.2, 0.0}): 3 of 15
    assert result.metrics["p_value"] == pytest.approx(3 / 15)


def test_rarity_correlation_matches_scipy():
    table = drawn(seed=5, n_members=150, pairs=3, planted=2.0, planted_class="rare")
    result = memorization_detector(table, memorization_config(n_permutations=99, n_bootstrap=50), seed=0)
    members = table.member
    mean_m = table.m.mean(axis=0)
    expected = sps.spearmanr(table.class_frequency[members], mean_m[members])
    assert result.metrics["rarity_spearman_rho"] == pytest.approx(expected.statistic)
    assert result.metrics["rarity_spearman_p"] == pytest.approx(expected.pvalue)
    per_pair = [sps.spearmanr(table.class_frequency[members], row[members]).statistic for row in table.m]
    assert result.metrics["rarity_rho_pair_mean"] == pytest.approx(np.mean(per_pair))
    # the rare class was planted: rarity correlates negatively with M(x) in every pair
    assert result.metrics["rarity_spearman_rho"] < 0 and result.metrics["rarity_n_negative_pairs"] == 3
    assert result.metrics["rarity_sign_test_p"] == pytest.approx(2 / 8)
    assert result.table.loc[0, "class"] == "rare"


def test_atypicality_raw_and_within_class():
    table = losses(MEMBER, CLASSES, CANDIDATE, INDEPENDENT)
    atypicality = np.array([0.3, 0.1, 0.5, 0.2, np.nan, np.nan])
    result = memorization_detector(table, memorization_config(n_permutations=99, n_bootstrap=50), 0, atypicality)
    m = np.array([0.6, 0.5, 0.2, 0.0])
    raw = sps.spearmanr(atypicality[:4], m)
    # within class: a (0.3, 0.1 | 0.6, 0.5) -> (+0.1, -0.1 | +0.05, -0.05); b (0.5, 0.2 | 0.2, 0.0) -> same signs
    within = sps.spearmanr([0.1, -0.1, 0.15, -0.15], [0.05, -0.05, 0.1, -0.1])
    assert result.metrics["atypicality_spearman_rho"] == pytest.approx(raw.statistic)
    assert result.metrics["atypicality_within_class_rho"] == pytest.approx(within.statistic)
    assert result.extra_tables["per_example"]["atypicality"].iloc[:4].tolist() == pytest.approx(atypicality[:4])


@pytest.mark.extended
def test_null_m_is_centred_on_zero_and_p_is_uniform():
    """Candidate and independent from one distribution (no memorization) over 200 worlds."""
    p_values, centres = [], []
    for seed in range(200):
        result = memorization_detector(drawn(seed), memorization_config(n_permutations=199, n_bootstrap=20), seed)
        p_values.append(result.metrics["p_value"])
        centres.append(result.metrics["m_mean_members"])
    p_values = np.asarray(p_values)
    assert abs(np.mean(centres)) < 3 * np.std(centres) / np.sqrt(len(centres))
    rejections = int(np.sum(p_values <= 0.05))
    assert sps.binomtest(rejections, 200, 0.05).pvalue > 0.001, rejections
    assert sps.kstest(p_values, "uniform").pvalue > 0.001


def test_power_planted_memorization_is_detected_and_ranked():
    table = drawn(seed=11, n_members=120, planted=1.5, planted_class="middle")
    result = memorization_detector(table, memorization_config(n_permutations=999, n_bootstrap=200), seed=0)
    assert result.metrics["p_value"] < 0.01 and result.metrics["flag"] == 1.0
    assert result.table.loc[0, "class"] == "middle"
    assert result.table.loc[0, "m_ci_low"] > 0


def test_bad_tiers_are_refused():
    table = losses(MEMBER, CLASSES, CANDIDATE, INDEPENDENT)
    with pytest.raises(ValueError, match="risk_tiers"):
        memorization_detector(table, memorization_config(risk_tiers=[0.3, 0.1]), 0)
