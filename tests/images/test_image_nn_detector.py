"""The image_nn statistics: tau, flags and p-value by hand and by enumeration; null and power."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from medexp.detectors.image_nn import alpha_sweep, flag_count_p_value, image_nn_detector, null_rank, null_threshold
from medexp.images.search import ExactSearch, nearest
from medexp.images.store import EmbeddingSet


def neighbours(distances) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "example_id": [f"b::test::{i}" for i in range(len(distances))],
            "position": range(len(distances)),
            "neighbour_id": [f"c{i}" for i in range(len(distances))],
            "distance": distances,
        }
    )


# --- hand-computed values ----------------------------------------------------------------------


def test_tau_is_the_ceil_alpha_m_th_smallest_calibration_distance():
    calibration = np.array([0.5, 0.1, 0.3, 0.2, 0.4])
    assert null_rank(0.4, 5) == 2 and null_threshold(calibration, 0.4) == 0.2
    assert null_rank(0.01, 5000) == 50  # 0.01 * 5000 is not taken up to 51 by float error
    assert null_rank(0.001, 100) == 1  # never below the smallest distance
    assert null_threshold(calibration, 0.99) == 0.5


def _beta(p: int, q: int) -> Fraction:
    return Fraction(math.factorial(p - 1) * math.factorial(q - 1), math.factorial(p + q - 1))


def test_p_value_matches_the_beta_binomial_tail_by_hand():
    # n=4 benchmark images, m=5 calibration distances, k=2: P(X >= 2) with X ~ BetaBinom(4, 2, 4)
    n, m, k = 4, 5, 2
    pmf = [math.comb(n, x) * _beta(x + k, n - x + m - k + 1) / _beta(k, m - k + 1) for x in range(n + 1)]
    assert sum(pmf) == 1
    assert flag_count_p_value(2, n, m, k) == pytest.approx(float(sum(pmf[2:])), rel=1e-12)
    assert flag_count_p_value(0, n, m, k) == 1.0


def test_p_value_equals_the_share_of_interleavings_with_as_many_flags():
    """Under exchangeability every ordering of the n + m distances is equally likely."""
    n, m, k = 3, 6, 2
    counts = np.zeros(n + 1)
    for benchmark_slots in itertools.combinations(range(n + m), n):
        calibration_slots = [slot for slot in range(n + m) if slot not in benchmark_slots]
        tau_slot = calibration_slots[k - 1]
        counts[sum(slot < tau_slot for slot in benchmark_slots)] += 1
    tail = counts[::-1].cumsum()[::-1] / counts.sum()
    for flagged in range(n + 1):
        assert flag_count_p_value(flagged, n, m, k) == pytest.approx(tail[flagged], rel=1e-10)


def test_tiny_p_values_stay_accurate():
    # 100 of 400 flagged where 4 are expected: far below 1e-13, where 1 - cdf would be noise
    n, m, k, flagged = 400, 1700, 17, 100
    exact = sum(
        math.comb(n, x) * _beta(x + k, n - x + m - k + 1) / _beta(k, m - k + 1) for x in range(flagged, n + 1)
    )
    assert flag_count_p_value(flagged, n, m, k) == pytest.approx(float(exact), rel=1e-9)


def test_detector_flags_strictly_below_tau_and_reports_hand_values():
    calibration = np.array([0.5, 0.1, 0.3, 0.2, 0.4])
    result = image_nn_detector(neighbours([0.05, 0.2, 0.15, 0.6]), calibration, 0.4, [0.2, 0.4], test_alpha=0.05)
    assert result.table["flagged"].tolist() == [True, False, True, False]  # 0.2 == tau is not flagged
    metrics = result.metrics
    assert metrics["tau"] == 0.2 and metrics["n_images_flagged"] == 2 and metrics["n_examples"] == metrics["n_images"] == 4
    assert metrics["statistic"] == metrics["image_flag_rate"] == 0.5
    assert metrics["n_questions"] == 4 and metrics["question_flag_rate"] == 0.5  # one question per image by default
    assert metrics["expected_flag_rate"] == pytest.approx(2 / 6)
    assert metrics["p_value"] == pytest.approx(flag_count_p_value(2, 4, 5, 2))
    assert metrics["flag"] == float(metrics["p_value"] < 0.05)
    assert metrics["min_distance"] == 0.05 and metrics["n_exact_duplicates_images"] == 0
    assert metrics["tau_degenerate"] == 0.0 and result.warnings == []
    pairs = result.extra_tables["flagged_pairs"]
    assert pairs["example_id"].tolist() == ["b::test::0", "b::test::2"]  # closest first
    sweep = result.extra_tables["alpha_sweep"]
    assert sweep["alpha"].tolist() == [0.2, 0.4]
    assert sweep["tau"].tolist() == [0.1, 0.2] and sweep["n_flagged"].tolist() == [1, 2]
    assert set(result.figures) == {"alpha_sweep", "nn_distances"}


def test_images_are_the_unit_and_questions_are_counted_beside_them():
    # 4 images used by 3, 1, 5 and 1 questions; image 0 is an exact copy (distance 0)
    images = neighbours([0.0, 0.15, 0.3, 0.05]).assign(n_questions=[3, 1, 5, 1])
    calibration = np.array([0.5, 0.1, 0.3, 0.2, 0.4])
    result = image_nn_detector(images, calibration, 0.4, [0.2], test_alpha=0.05)
    metrics = result.metrics
    assert result.table["flagged"].tolist() == [True, True, False, True]
    assert result.table["exact_duplicate"].tolist() == [True, False, False, False]
    assert (metrics["n_images"], metrics["n_images_flagged"], metrics["image_flag_rate"]) == (4, 3, 0.75)
    assert (metrics["n_questions"], metrics["n_questions_flagged"]) == (10, 5)
    assert metrics["question_flag_rate"] == 0.5
    assert (metrics["n_exact_duplicates_images"], metrics["n_exact_duplicates_questions"]) == (1, 3)
    assert metrics["p_value"] == pytest.approx(flag_count_p_value(3, 4, 5, 2))  # images, not questions, are tested
    pairs = result.extra_tables["flagged_pairs"]
    assert pairs["example_id"].tolist() == ["b::test::0", "b::test::3", "b::test::1"]  # exact first, then closest


def test_exact_copies_are_flagged_whatever_tau_and_a_degenerate_tau_warns():
    """The calibration a corpus with internal copies gives without deduplication: mostly zeros."""
    images = neighbours([0.0, 0.0, 0.0, 0.2])
    calibration = np.array([0.0] * 60 + list(np.linspace(0.1, 0.5, 40)))
    result = image_nn_detector(images, calibration, 0.05, [0.01, 0.5], test_alpha=0.01, resolution=4.8e-7)
    metrics = result.metrics
    assert metrics["tau"] == 0.0 and metrics["tau_degenerate"] == 1.0
    assert result.table["flagged"].tolist() == [True, True, True, False]  # nothing is < 0, yet copies count
    assert metrics["n_exact_duplicates_images"] == 3 and metrics["n_images_flagged"] == 3
    assert len(result.warnings) == 1 and "tau = 0 is degenerate" in result.warnings[0]
    sweep = result.extra_tables["alpha_sweep"]
    assert sweep["n_flagged"].tolist() == [3, 3, 3]  # at 0.5 tau is 0 as well (60 of 100 distances are 0)
    # below the resolution (a float16 tie), not only at zero
    tiny = image_nn_detector(images, np.array([1e-8] * 10 + [0.3] * 90), 0.05, [], 0.01, resolution=4.8e-7)
    assert tiny.metrics["tau_degenerate"] == 1.0 and tiny.warnings
    fine = image_nn_detector(images, np.array([1e-3] * 10 + [0.3] * 90), 0.05, [], 0.01, resolution=4.8e-7)
    assert fine.metrics["tau_degenerate"] == 0.0 and not fine.warnings


def test_sweep_flag_rate_is_monotone_in_alpha():
    rng = np.random.default_rng(3)
    sweep = alpha_sweep(rng.random(300), rng.random(2000), [0.1, 0.001, 0.01, 0.05])
    assert sweep["alpha"].tolist() == [0.001, 0.01, 0.05, 0.1]
    assert sweep["tau"].is_monotonic_increasing and sweep["flag_rate"].is_monotonic_increasing


@pytest.mark.parametrize(
    "distances,calibration,alpha,message",
    [
        ([0.1, float("nan")], [0.2, 0.3], 0.5, "non-finite benchmark distances"),
        ([0.1], [0.2, float("inf")], 0.5, "non-finite calibration distances"),
        ([0.1], [], 0.5, "no calibration distances"),
        ([0.1], [0.2, 0.3], 1.5, "alpha must lie in"),
        ([-0.1], [0.2, 0.3], 0.5, "negative benchmark distances"),
    ],
)
def test_bad_inputs_fail_clearly(distances, calibration, alpha, message):
    with pytest.raises(ValueError, match=message):
        image_nn_detector(neighbours(distances), np.array(calibration), alpha, [], test_alpha=0.01)


def test_empty_benchmark_and_missing_columns_fail_clearly():
    with pytest.raises(ValueError, match="no benchmark images"):
        image_nn_detector(neighbours([]), np.array([0.1, 0.2]), 0.5, [], 0.01)
    with pytest.raises(ValueError, match="lacks column"):
        image_nn_detector(neighbours([0.1]).drop(columns="neighbour_id"), np.array([0.1, 0.2]), 0.5, [], 0.01)


# --- null and power ----------------------------------------------------------------------------


def _cell(rng: np.random.Generator, n_corpus: int, n_bench: int, n_calibration: int, planted: int = 0, noise: float = 0.02):
    """Corpus and benchmark drawn from one distribution; ``planted`` benchmark images get a noisy copy in the corpus.

    As in the audit (5,000 of 1.85M), the calibration sample is a small part of the corpus, so
    its nearest-neighbour distances are close to independent draws.
    """
    dim = 8
    centres = rng.normal(size=(20, dim))  # clustered, like images of a few views

    def draw(count: int) -> np.ndarray:
        return centres[rng.integers(len(centres), size=count)] + 0.6 * rng.normal(size=(count, dim))

    corpus, bench = draw(n_corpus), draw(n_bench)
    if planted:
        corpus[:planted] = bench[:planted] + noise * rng.normal(size=(planted, dim))
    corpus_set = EmbeddingSet.from_array([f"c{i}" for i in range(n_corpus)], corpus)
    searcher = ExactSearch(corpus_set, use_gpu=False)
    sample = np.sort(rng.choice(n_corpus, size=n_calibration, replace=False))
    calibration, _ = nearest(searcher, corpus_set.rows(sample), exclude=sample)
    distances, _ = nearest(searcher, EmbeddingSet.from_array(["b"] * n_bench, bench).rows(np.arange(n_bench)))
    return distances, calibration


def test_null_flag_rate_is_alpha_and_the_test_keeps_its_level():
    tau_alpha, level, runs = 0.05, 0.05, 200
    flag_rates, p_values = [], []
    for seed in range(runs):
        distances, calibration = _cell(np.random.default_rng(seed), n_corpus=1800, n_bench=150, n_calibration=600)
        # the detector's own numbers (its sweep row at tau_alpha), without drawing figures
        row = alpha_sweep(distances, calibration, [tau_alpha]).iloc[0]
        flag_rates.append(row["flag_rate"])
        p_values.append(row["p_value"])
    # mean flag rate within 4 standard errors of k/(m+1) = 30/601
    assert abs(np.mean(flag_rates) - 30 / 601) < 4 * np.std(flag_rates) / np.sqrt(runs)
    false_positive_rate = np.mean(np.array(p_values) < level)
    assert false_positive_rate <= level + 3 * np.sqrt(level * (1 - level) / runs)
    assert false_positive_rate >= 0.01  # valid but not vacuous: it does reject sometimes


def test_planted_near_duplicates_are_flagged_and_detected():
    rng = np.random.default_rng(11)
    distances, calibration = _cell(rng, n_corpus=1800, n_bench=150, n_calibration=600, planted=15)
    result = image_nn_detector(neighbours(distances), calibration, 0.01, [], test_alpha=0.01)
    flagged = result.table["flagged"].to_numpy()
    assert flagged[:15].all()  # every planted copy is closer than tau
    assert flagged[15:].mean() < 0.05
    assert result.metrics["p_value"] < 1e-6 and result.metrics["flag"] == 1.0
