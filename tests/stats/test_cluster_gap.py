"""The image-clustered gap of overlap_gap: its estimate and p-value against values computed by
hand, its false-positive rate when flags fall on images at random, its power on a planted
per-image advantage, and its baseline difference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from medexp.stats.cluster_gap import cluster_gap, gap_difference


def _clustered(rng, n_images: int, per_image: int, image_sd: float = 1.0):
    images = np.repeat(np.arange(n_images), per_image)
    scores = rng.normal(0.0, image_sd, n_images)[images] + rng.normal(0.0, 1.0, images.size)
    return images, scores


def test_the_gap_and_its_exact_permutation_p_match_a_hand_computation():
    # 6 images of unequal size, 2 flagged: every one of the C(6, 2) = 15 flag placements enumerated by hand
    images = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4, 5, 5, 5])
    scores = np.array([3.0, 2.5, 2.0, 1.0, 1.5, 0.5, 0.0, 1.0, 0.2, -1.0, 0.3, 0.1, 2.2, 1.8, 2.4])
    flagged_images = {0, 5}
    flags = np.isin(images, list(flagged_images))

    def gap_of(chosen):
        mask = np.isin(images, list(chosen))
        return scores[mask].mean() - scores[~mask].mean()

    observed = gap_of(flagged_images)
    placements = [gap_of(chosen) for chosen in itertools.combinations(range(6), 2)]
    exact_p = np.mean([gap >= observed - 1e-12 for gap in placements])
    result = cluster_gap(scores, flags, images, n_permutations=20_000, n_resamples=200, seed=7)
    assert result.gap == pytest.approx(observed, abs=1e-12)
    assert result.mean_flagged == pytest.approx(scores[flags].mean())
    assert (result.n_images, result.n_flagged_images, result.n_flagged_items) == (6, 2, 6)
    assert exact_p == pytest.approx(1 / 15)  # the observed placement is the largest gap
    assert result.p_value == pytest.approx(exact_p, abs=0.006)  # Monte Carlo error at 20,000 draws: ~0.0018


def test_the_interval_resamples_images_not_questions():
    """With strong image effects an interval over questions would be too narrow; resampling images
    gives a wider one, close to the spread of the gap over independent replicates."""
    rng = np.random.default_rng(0)
    images, scores = _clustered(rng, 40, 10, image_sd=2.0)
    flags = images < 10
    clustered = cluster_gap(scores, flags, images, n_permutations=10, n_resamples=2000, seed=1)
    by_item = cluster_gap(scores, flags, None, n_permutations=10, n_resamples=2000, seed=1)
    assert (clustered.high - clustered.low) > 2.5 * (by_item.high - by_item.low)
    # the true sd of the gap: image means have var 4 + 1/10; 10 vs 30 images
    true_sd = np.sqrt(4.1 / 10 + 4.1 / 30)
    assert (clustered.high - clustered.low) / (2 * 1.96) == pytest.approx(true_sd, rel=0.3)


def test_flags_placed_on_random_images_give_uniform_p_values():
    rng = np.random.default_rng(2024)
    p_values = []
    for replicate in range(300):
        images, scores = _clustered(rng, 30, 8, image_sd=1.5)
        flags = np.isin(images, rng.choice(30, 6, replace=False))
        p_values.append(cluster_gap(scores, flags, images, n_permutations=400, n_resamples=10,
                                    seed=replicate).p_value)
    p_values = np.asarray(p_values)
    assert sps.kstest(p_values, "uniform").pvalue > 0.01
    assert 0.02 <= np.mean(p_values < 0.05) <= 0.09  # 300 draws at 5%: sd 1.3 points


def test_a_planted_per_image_advantage_is_found():
    rng = np.random.default_rng(11)
    found, covered = 0, 0
    for replicate in range(40):
        images, scores = _clustered(rng, 40, 8, image_sd=0.5)
        flagged = rng.choice(40, 10, replace=False)
        flags = np.isin(images, flagged)
        planted = 0.8  # every question on a flagged image scores 0.8 nats higher
        result = cluster_gap(scores + planted * flags, flags, images, n_permutations=1000, n_resamples=500,
                             seed=replicate)
        found += result.p_value < 0.01
        covered += result.low <= planted <= result.high
    assert found >= 36  # power well above 0.8 at this effect (d about 1.4 on image means)
    assert covered >= 33  # a 95% interval covers the planted gap in most replicates


def test_the_same_seed_gives_the_same_p_value_and_another_seed_another_draw():
    rng = np.random.default_rng(5)
    images, scores = _clustered(rng, 20, 5)
    flags = images < 5
    first = cluster_gap(scores, flags, images, n_permutations=500, n_resamples=100, seed=3)
    assert cluster_gap(scores, flags, images, n_permutations=500, n_resamples=100, seed=3) == first
    assert cluster_gap(scores, flags, images, n_permutations=500, n_resamples=100, seed=4).n_exceed != first.n_exceed


def test_the_baseline_difference_removes_what_both_models_share():
    rng = np.random.default_rng(3)
    images, baseline = _clustered(rng, 30, 6)
    flags = images < 8
    easy = 0.5 * flags  # flagged images are easier for every model
    target = baseline + easy + 0.3 * flags + rng.normal(0, 0.05, baseline.size)
    difference = gap_difference(target, baseline + easy, flags, images, n_permutations=2000, n_resamples=500, seed=1)
    hand = (target[flags].mean() - target[~flags].mean()) - ((baseline + easy)[flags].mean()
                                                             - (baseline + easy)[~flags].mean())
    assert difference.difference == pytest.approx(hand)
    assert difference.low < 0.3 < difference.high and difference.p_value < 0.01
    same = gap_difference(target, target, flags, images, n_permutations=200, n_resamples=100, seed=1)
    assert same.difference == 0.0 and same.p_value == 1.0


def test_a_flag_that_varies_within_an_image_is_refused():
    images = np.array([0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="1 image\\(s\\) have flagged and unflagged questions \\(first: 1\\)"):
        cluster_gap(np.zeros(6), np.array([1, 1, 1, 0, 0, 0], bool), images)
    with pytest.raises(ValueError, match="needs flagged and unflagged images: 0 of 3"):
        cluster_gap(np.zeros(6), np.zeros(6, bool), images)
    with pytest.raises(ValueError, match="1 score\\(s\\) are NaN or infinite"):
        cluster_gap(np.array([0, 0, 0, 0, np.nan, 0]), np.array([1, 1, 0, 0, 0, 0], bool), images)
