"""mink_tail: Min-K%++ scores, cohort Delta tail, strata, null false-positive rate and power."""

import itertools

import numpy as np
import pytest

from medexp.detectors import CohortScores, mink_tail_detector
from medexp.detectors.cohort import min_k_count, min_k_scores
from medexp.stats import deltas_vs_cohort
from tests.detectors.synthetic import cohort_of_scores, config, false_positive_band, meta_frame, score_table


def _cfg(**overrides):
    values = dict(alpha=0.01, k_percent=20.0, thresholds=[1.0, 5.0], flag_threshold=5.0, flag_fraction=0.3,
                  strata=["answer_type", "modality"], n_permutations=2000)
    return config(**{**values, **overrides})


def test_min_k_takes_the_mean_of_the_lowest_k_percent():
    tokens = [[-1.0, 2.0, 0.5, -3.0, 4.0], [0.7], [2.0, -2.0, 1.0, 0.0]]
    np.testing.assert_allclose(min_k_scores(tokens, 20), [-3.0, 0.7, -2.0])  # floor(K% n), at least one
    np.testing.assert_allclose(min_k_scores(tokens, 40), [-2.0, 0.7, -2.0])  # 2, 1 and 1 tokens
    np.testing.assert_allclose(min_k_scores(tokens, 100), [0.5, 0.7, 0.25])
    assert [min_k_count(n, 20) for n in (1, 4, 5, 9, 10, 11)] == [1, 1, 1, 1, 2, 2]
    with pytest.raises(ValueError, match="no answer tokens"):
        min_k_scores([[]], 20)
    with pytest.raises(ValueError, match=r"k_percent must be in \(0, 100\]"):
        min_k_scores(tokens, 0)


# Target m0 and three references; medians of the references per example: 1, 0, 1, 0, 0, 1.
TARGET = [3.0, 0.0, 10.0, 0.5, -1.0, 7.0]
REFERENCES = [[0, 1, 2], [0, 1, -1], [1, 2, 0], [0, 0, 1], [0, 0, 0], [0, 1, 8]]
DELTA = np.array([2.0, 0.0, 9.0, 0.5, -1.0, 6.0])


def _hand_cohort():
    return cohort_of_scores(minkpp=np.column_stack([TARGET, REFERENCES]))


def test_tail_metrics_by_hand():
    meta = meta_frame(6, answer_type=["CLOSED", "OPEN", "OPEN", "CLOSED", "CLOSED", "OPEN"])
    result = mink_tail_detector(_hand_cohort(), _cfg(), seed=0, meta=meta)
    m = result.metrics
    assert m["delta_max"] == 9.0 and m["delta_mean"] == pytest.approx(DELTA.mean())
    # Sorted Delta -1, 0, 0.5, 2, 6, 9: q95 at rank 4.75 -> 6 + 0.75 * 3, q99 at 4.95.
    assert m["delta_q95"] == pytest.approx(8.25) and m["delta_q99"] == pytest.approx(8.85)
    assert m["pr_delta_gt_1"] == pytest.approx(3 / 6) and m["pr_delta_gt_5"] == pytest.approx(2 / 6)
    assert m["statistic"] == pytest.approx(2 / 6)
    assert m["flag"] == 1.0  # 2/6 > 0.3
    assert mink_tail_detector(_hand_cohort(), _cfg(flag_fraction=0.34), 0).metrics["flag"] == 0.0
    assert m["n_examples"] == 6 and m["n_models"] == 4

    table = result.table.set_index(["field", "value"])
    assert table.loc[("all", "all"), "n"] == 6
    assert table.loc[("answer_type", "CLOSED"), "pr_delta_gt_5"] == 0.0
    assert table.loc[("answer_type", "OPEN"), "pr_delta_gt_5"] == pytest.approx(2 / 3)
    assert table.loc[("answer_type", "OPEN"), "delta_max"] == 9.0
    assert list(table["flag"]) == [True, False, True]
    assert "modality" not in set(result.table["field"])  # not in this benchmark's meta: skipped
    assert set(result.figures) == {"delta_tail"}


def test_p_value_is_the_relabel_test_of_the_tail_fraction():
    """Against enumeration of all 4^6 relabelings of the hand cohort."""
    deltas = deltas_vs_cohort(np.column_stack([TARGET, REFERENCES]))
    np.testing.assert_allclose(deltas[:, 0], DELTA)
    exceed = deltas > 5.0
    observed = exceed[:, 0].sum()
    hits = sum(exceed[np.arange(6), list(cols)].sum() >= observed for cols in itertools.product(range(4), repeat=6))
    exact = hits / 4**6
    result = mink_tail_detector(_hand_cohort(), _cfg(n_permutations=40_000), seed=5)
    assert abs(result.metrics["p_value"] - exact) < 4 * np.sqrt(exact * (1 - exact) / 40_000) + 1e-4


def test_the_target_is_never_its_own_reference_and_errors_are_named():
    with pytest.raises(ValueError, match="at least 2 reference models"):
        mink_tail_detector(cohort_of_scores(minkpp=np.zeros((5, 2))), _cfg(), 0)
    with pytest.raises(ValueError, match="flag_fraction"):
        mink_tail_detector(_hand_cohort(), _cfg(flag_fraction=1.5), 0)
    tables = dict(_hand_cohort().tables)
    tables["m3"] = score_table([[0.0]] * 5)
    with pytest.raises(ValueError, match="'m3' was scored on other examples"):
        CohortScores("m0", tables)
    tables["m3"] = score_table([[0.0]] * 5 + [[float("nan")]])
    with pytest.raises(ValueError, match="NaN or infinite"):
        mink_tail_detector(CohortScores("m0", tables), _cfg(), 0)


def _synthetic_cohort(seed: int, n: int = 300, models: int = 4, planted: float = 0.0, share: float = 0.1):
    """Exchangeable cohort: shared easiness e_i plus heavy-tailed per-model noise; optionally
    the target's score is raised by ``planted`` on a random ``share`` of the examples."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n, 1)) + rng.standard_t(df=3, size=(n, models))
    scores[:, 0] += planted * (rng.random(n) < share)
    return cohort_of_scores(minkpp=scores)


@pytest.mark.extended
def test_null_false_positive_rate_is_near_alpha():
    alpha, trials = 0.05, 600
    cfg = _cfg(thresholds=[3.0], flag_threshold=3.0, flag_fraction=0.05, strata=[], n_permutations=400, alpha=alpha)
    p_values = np.array([mink_tail_detector(_synthetic_cohort(seed), cfg, seed).metrics["p_value"] for seed in range(trials)])
    rate = float(np.mean(p_values < alpha))
    low, high = false_positive_band(alpha, trials)
    assert low <= rate <= high, rate


def test_planted_tail_is_detected():
    cfg = _cfg(thresholds=[3.0], flag_threshold=3.0, flag_fraction=0.05, strata=[], n_permutations=1000)
    results = [mink_tail_detector(_synthetic_cohort(seed, planted=8.0), cfg, seed).metrics for seed in range(20)]
    assert all(r["p_value"] < 0.01 and r["flag"] == 1.0 for r in results)
    assert min(r["pr_delta_gt_3"] for r in results) > 0.05
