"""The overlap gaps on hand-computed examples: on scores (overlap_gap) and on answers
(overlap_gap_answers), the gap, its image-resampling interval and its image-permutation p-value,
per stratum and against a baseline, and the MDE, each against values enumerated here by hand
(every flag placement, every bootstrap resample), never through medexp's own statistics."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from scipy import stats as sps

from medexp.config import compose

# 15 questions on 6 images of unequal size; images 0 and 5 are flagged
IMAGES = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4, 5, 5, 5])
FLAGGED_IMAGES = (0, 5)
TYPES = np.array(["OPEN", "CLOSED"] * 7 + ["OPEN"])
SCORES = np.array([3.0, 2.5, 2.0, 1.0, 1.5, 0.5, 0.0, 1.0, 0.2, -1.0, 0.3, 0.1, 2.2, 1.8, 2.4])
BASELINE_SCORES = np.array([1.0, 0.5, 1.5, 1.1, 0.4, 0.5, 0.9, 1.0, 0.2, 0.0, 0.3, 0.8, 0.2, 1.8, 0.4])
RIGHT = np.array([1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 1, 1, 1], dtype=bool)
BASELINE_RIGHT = np.array([0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0], dtype=bool)
N_DRAWS = 20_000


def _ids():
    return [f"b::test::{i}" for i in range(IMAGES.size)]


def _examples() -> pd.DataFrame:
    return pd.DataFrame({"example_id": _ids(), "image": [f"img{image}" for image in IMAGES], "answer_type": TYPES})


def _flags() -> pd.DataFrame:
    return pd.DataFrame({"example_id": _ids(), "flagged": np.isin(IMAGES, FLAGGED_IMAGES)})


def _gap(values, images, flagged_images) -> float:
    flags = np.isin(images, flagged_images)
    return float(values[flags].mean() - values[~flags].mean())


def _exact_p(values, images, reference=None) -> float:
    """The share of the C(n, 2) placements of two flagged images whose gap (minus the reference's on
    the same placement) is at least the observed one."""
    def statistic(chosen):
        gap = _gap(values, images, chosen)
        return gap - _gap(reference, images, chosen) if reference is not None else gap

    observed = statistic(FLAGGED_IMAGES)
    placements = [statistic(chosen) for chosen in itertools.combinations(sorted(set(images)), 2)]
    return float(np.mean([value >= observed - 1e-12 for value in placements]))


def _bootstrap_distribution(values, images) -> np.ndarray:
    """The gap over every one of the n^n equally likely ordered draws of n images with replacement
    (draws holding no flagged or no unflagged image have no gap and are left out)."""
    labels = np.array(sorted(set(images)))
    flagged = np.isin(labels, FLAGGED_IMAGES)
    sums = np.array([values[images == image].sum() for image in labels])
    sizes = np.array([(images == image).sum() for image in labels], dtype=float)
    draws = np.array(list(itertools.product(range(labels.size), repeat=labels.size)))
    times = (draws[:, :, None] == np.arange(labels.size)).sum(axis=1)  # how often each image is drawn
    with np.errstate(invalid="ignore", divide="ignore"):
        gaps = (times @ (sums * flagged)) / (times @ (sizes * flagged)) - (times @ (sums * ~flagged)) / (
            times @ (sizes * ~flagged))
    return gaps[np.isfinite(gaps)]


def _check_percentile(distribution: np.ndarray, low: float, high: float, tolerance: float = 0.006) -> None:
    """``low`` and ``high`` are the 2.5% and 97.5% points of the exact distribution (within Monte Carlo error)."""
    for point, level in ((low, 0.025), (high, 0.975)):
        assert np.mean(distribution < point - 1e-12) <= level + tolerance
        assert np.mean(distribution <= point + 1e-12) >= level - tolerance


def _mde(n_first: int, n_second: int, alpha: float) -> float:
    """Cohen's d a one-sided two-sample t-test detects with power 0.8 (noncentral t, solved here)."""
    df = n_first + n_second - 2
    critical = sps.t.ppf(1 - alpha, df)

    def power(d):
        return sps.nct.sf(critical, df, d * np.sqrt(n_first * n_second / (n_first + n_second))) - 0.8

    return optimize.brentq(power, 1e-6, 50)


def _pooled_image_sd(values, images) -> float:
    means = {image: values[images == image].mean() for image in set(images)}
    groups = [np.array([means[i] for i in sorted(means) if (i in FLAGGED_IMAGES) == flagged]) for flagged in (1, 0)]
    squares = sum(((group - group.mean()) ** 2).sum() for group in groups)
    return float(np.sqrt(squares / (len(means) - 2)))


def _detector_cfg(name: str):
    return compose([f"detector={name}", f"detector.n_permutations={N_DRAWS}", f"detector.n_resamples={N_DRAWS}",
                    "flags@detector.flags=split_overlap"]).detector


def test_the_score_gap_its_interval_and_its_p_value_are_the_hand_enumerated_ones():
    from medexp.detectors.overlap_gap import overlap_gap_detector

    scores = pd.DataFrame({"example_id": _ids(), "mean_logprob": SCORES})
    baseline = pd.DataFrame({"example_id": _ids(), "mean_logprob": BASELINE_SCORES})
    result = overlap_gap_detector(scores, _flags(), _examples(), _detector_cfg("overlap_gap"), seed=11,
                                  baseline=baseline)
    metrics = result.metrics
    assert metrics["gap"] == pytest.approx(_gap(SCORES, IMAGES, FLAGGED_IMAGES), abs=1e-12)
    assert metrics["mean_flagged"] == pytest.approx(np.mean(SCORES[[0, 1, 2, 12, 13, 14]]))
    assert (metrics["n_examples"], metrics["n_flagged"], metrics["n_images"], metrics["n_flagged_images"]) == \
        (15, 6, 6, 2)
    exact = _exact_p(SCORES, IMAGES)
    assert exact == pytest.approx(1 / 15)  # the observed placement is the largest of the 15
    assert metrics["p_value"] == pytest.approx(exact, abs=0.006)  # Monte Carlo error at 20,000 draws: ~0.0018
    _check_percentile(_bootstrap_distribution(SCORES, IMAGES), metrics["gap_ci_low"], metrics["gap_ci_high"])
    hand_difference = _gap(SCORES, IMAGES, FLAGGED_IMAGES) - _gap(BASELINE_SCORES, IMAGES, FLAGGED_IMAGES)
    assert metrics["gap_minus_baseline"] == pytest.approx(hand_difference, abs=1e-12)
    assert metrics["gap_minus_baseline_p_value"] == pytest.approx(_exact_p(SCORES, IMAGES, BASELINE_SCORES), abs=0.006)
    opened = TYPES == "OPEN"
    assert metrics["gap.answer_type.OPEN"] == pytest.approx(_gap(SCORES[opened], IMAGES[opened], FLAGGED_IMAGES))


def test_the_accuracy_gap_of_answers_with_its_interval_p_value_baseline_and_mde():
    from medexp.detectors.overlap_gap_answers import overlap_gap_answers_detector

    def responses(right):
        status = np.where(np.arange(IMAGES.size) == 7, "error", "ok")  # question 7 got no answer
        return pd.DataFrame({"example_id": _ids(), "status": status, "correct": right & (status == "ok")})

    cfg = _detector_cfg("overlap_gap_answers")
    result = overlap_gap_answers_detector(responses(RIGHT), _flags(), _examples(), cfg, seed=5,
                                          baseline=responses(BASELINE_RIGHT))
    metrics = result.metrics
    answered = np.arange(IMAGES.size) != 7
    right, images = RIGHT[answered].astype(float), IMAGES[answered]
    baseline_right = BASELINE_RIGHT[answered].astype(float)
    assert metrics["n_unanswered"] == 1 and metrics["n_examples"] == 14
    assert metrics["mean_flagged"] == pytest.approx(5 / 6) and metrics["mean_unflagged"] == pytest.approx(2 / 8)
    assert metrics["gap"] == pytest.approx(5 / 6 - 2 / 8)
    assert metrics["p_value"] == pytest.approx(_exact_p(right, images), abs=0.006)
    _check_percentile(_bootstrap_distribution(right, images), metrics["gap_ci_low"], metrics["gap_ci_high"])
    assert metrics["baseline_gap"] == pytest.approx(_gap(baseline_right, images, FLAGGED_IMAGES))
    assert metrics["gap_minus_baseline"] == pytest.approx(5 / 6 - 2 / 8 - _gap(baseline_right, images, FLAGGED_IMAGES))
    assert metrics["gap_minus_baseline_p_value"] == pytest.approx(_exact_p(right, images, baseline_right), abs=0.006)
    # two flagged against four unflagged images: the test could only see an enormous gap
    assert metrics["mde"] == pytest.approx(_mde(2, 4, 0.01), rel=1e-6)
    assert metrics["mde_gap"] == pytest.approx(_mde(2, 4, 0.01) * _pooled_image_sd(right, images), rel=1e-6)
    assert metrics["underpowered"] == 1.0 and metrics["flag"] == 0.0
    (warning,) = [text for text in result.warnings if text.startswith("underpowered")]
    assert "2 flagged against 4 unflagged images detect a gap only from Cohen's d" in warning
    assert f"{metrics['mde_gap']:.3g} in accuracy" in warning and "is no evidence of no gap" in warning
