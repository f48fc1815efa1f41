"""loss: per-example NLL ranking and cohort gap by hand, null false-positive rate and power."""

import itertools

import numpy as np
import pytest

from medexp.detectors import loss_detector
from medexp.stats import deltas_vs_cohort
from tests.detectors.synthetic import cohort_of_scores, config, false_positive_band, meta_frame

MEAN_LOGPROB = np.column_stack([
    [-0.1, -2.0, -0.5, -1.0],  # m0, the target: NLL 0.1, 2.0, 0.5, 1.0
    [-1.0, -1.0, -0.4, -2.0],  # m1
    [-2.0, -3.0, -0.6, -1.0],  # m2
])


def _cfg(**overrides):
    return config(**{**dict(alpha=0.01, rank_by="score", top_n=3, n_permutations=2000), **overrides})


def test_ranking_and_gap_by_hand():
    meta = meta_frame(4, question=["q0", "q1", "q2", "q3"], answer=["a0", "a1", "a2", "a3"])
    result = loss_detector(cohort_of_scores(mean_logprob=MEAN_LOGPROB), _cfg(), seed=0, meta=meta)
    m = result.metrics
    # Cohort median NLL (two references: their mean) 1.5, 2.0, 0.5, 1.5; gaps 1.4, 0, 0, 0.5.
    assert m["statistic"] == pytest.approx(1.9 / 4)
    assert m["target_mean_nll"] == pytest.approx(0.9) and m["cohort_median_mean_nll"] == pytest.approx(1.375)
    assert m["frac_lowest_loss"] == pytest.approx(0.25)  # only example 0 beats both references
    table = result.table
    assert list(table["rank"]) == [1, 2, 3, 4]
    assert list(table["example_id"]) == ["ex::0000", "ex::0002", "ex::0003", "ex::0001"]  # lowest NLL first
    np.testing.assert_allclose(table["nll"], [0.1, 0.5, 1.0, 2.0])
    np.testing.assert_allclose(table["nll_gap"], [1.4, 0.0, 0.5, 0.0])
    assert list(table["question"]) == ["q0", "q2", "q3", "q1"]
    by_gap = loss_detector(cohort_of_scores(mean_logprob=MEAN_LOGPROB), _cfg(rank_by="delta"), 0).table
    assert list(by_gap["example_id"]) == ["ex::0000", "ex::0003", "ex::0001", "ex::0002"]  # ties keep order
    assert set(result.figures) == {"loss_ranking"}


def test_p_value_is_the_relabel_test_of_the_mean_gap():
    gaps = deltas_vs_cohort(MEAN_LOGPROB)  # (-NLL_j) - median(-NLL_others) = the NLL gap
    observed = gaps[:, 0].sum()
    hits = sum(gaps[np.arange(4), list(cols)].sum() >= observed - 1e-12 for cols in itertools.product(range(3), repeat=4))
    exact = hits / 3**4
    p_value = loss_detector(cohort_of_scores(mean_logprob=MEAN_LOGPROB), _cfg(n_permutations=40_000), 9).metrics["p_value"]
    assert abs(p_value - exact) < 4 * np.sqrt(exact * (1 - exact) / 40_000) + 1e-4


def test_errors_are_named():
    with pytest.raises(ValueError, match="at least 2 reference models"):
        loss_detector(cohort_of_scores(mean_logprob=MEAN_LOGPROB[:, :2]), _cfg(), 0)
    with pytest.raises(ValueError, match="top_n"):
        loss_detector(cohort_of_scores(mean_logprob=MEAN_LOGPROB), _cfg(top_n=0), 0)
    bad = MEAN_LOGPROB.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="1 of 4 mean NLL values of model 'm2' are NaN"):
        loss_detector(cohort_of_scores(mean_logprob=bad), _cfg(), 0)


def _synthetic_logprobs(seed: int, n: int = 200, models: int = 4, planted: float = 0.0, share: float = 0.3):
    """Exchangeable cohort: NLL = shared difficulty + per-model noise; optionally the target's
    NLL is lowered by ``planted`` nats on a random ``share`` of the examples."""
    rng = np.random.default_rng(seed)
    nll = rng.gamma(2.0, 0.5, size=(n, 1)) + rng.gamma(2.0, 0.25, size=(n, models))
    nll[:, 0] -= planted * (rng.random(n) < share)
    return -nll


@pytest.mark.extended
def test_null_false_positive_rate_is_near_alpha():
    alpha, trials = 0.05, 600
    cfg = _cfg(alpha=alpha, n_permutations=400)
    p_values = [loss_detector(cohort_of_scores(mean_logprob=_synthetic_logprobs(s)), cfg, s).metrics["p_value"]
                for s in range(trials)]
    low, high = false_positive_band(alpha, trials)
    assert low <= np.mean(np.array(p_values) < alpha) <= high


def test_planted_lower_loss_is_detected():
    for seed in range(20):
        result = loss_detector(cohort_of_scores(mean_logprob=_synthetic_logprobs(seed, planted=0.6)), _cfg(), seed)
        assert result.metrics["p_value"] < 0.01 and result.metrics["flag"] == 1.0
