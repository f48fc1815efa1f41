"""topk_jaccard: pairwise top-K overlap by hand, the exact null size, and planted shared sets."""

from math import comb

import numpy as np
import pytest
from scipy.stats import hypergeom

from medexp.detectors import topk_jaccard_detector
from tests.detectors.synthetic import cohort_of_scores, config, false_positive_band


def _cfg(**overrides):
    values = dict(alpha=0.01, top_k=2, k_percent=20.0, rank_by="score", flag_lift=10.0)
    return config(**{**values, **overrides})


def test_pairs_by_hand():
    scores = np.column_stack([
        [8, 7, 1, 1, 1, 1, 1, 0],  # m0 (target): top-2 {0, 1}
        [9, 1, 8, 1, 1, 1, 1, 1],  # m1: {0, 2}
        [1, 1, 1, 1, 1, 1, 9, 8],  # m2: {6, 7}
    ])
    result = topk_jaccard_detector(cohort_of_scores(minkpp=scores), _cfg())
    table = result.table.set_index(["model_a", "model_b"])
    pair = table.loc[("m0", "m1")]
    assert pair["intersection"] == 1 and pair["jaccard"] == pytest.approx(1 / 3)
    assert pair["expected"] == pytest.approx(4 / 8) and pair["lift"] == pytest.approx(2.0)
    # P[X >= 1], X ~ Hypergeometric(8, 2, 2): 1 - C(6,2)/C(8,2) = 13/28.
    assert pair["p_value"] == pytest.approx(1 - comb(6, 2) / comb(8, 2))
    assert table.loc[("m0", "m2"), "intersection"] == 0 and table.loc[("m0", "m2"), "p_value"] == pytest.approx(1.0)
    assert not table.loc[("m1", "m2"), "involves_target"]
    m = result.metrics
    assert m["p_value"] == pytest.approx(2 * 13 / 28)  # Bonferroni over the target's two pairs
    assert m["statistic"] == pytest.approx(1 / 3) and m["max_lift"] == 2.0 and m["expected_intersection"] == 0.5
    assert m["flag"] == 0.0 and m["n_models"] == 3 and m["n_examples"] == 8
    assert set(result.figures) == {"topk_overlap"}


def test_flag_needs_both_lift_and_significance():
    scores = np.column_stack([[9, 8, 0, 0, 0, 0, 0, 0], [9, 8, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 9, 8]])
    cohort = cohort_of_scores(minkpp=scores)
    # Identical top-2 sets: lift 4, p = 1/C(8,2) = 1/28, Bonferroni x2 = 1/14.
    significant = topk_jaccard_detector(cohort, _cfg(flag_lift=4.0, alpha=0.1))
    assert significant.metrics["p_value"] == pytest.approx(1 / 14) and significant.metrics["flag"] == 1.0
    assert topk_jaccard_detector(cohort, _cfg(flag_lift=4.0, alpha=0.05)).metrics["flag"] == 0.0
    assert topk_jaccard_detector(cohort, _cfg(flag_lift=5.0, alpha=0.1)).metrics["flag"] == 0.0


def test_rank_by_delta_removes_shared_easiness():
    scores = np.column_stack([[5, 0, 0, 0], [4, 0, 0, 3], [0, 0, 0, 0]])
    cohort = cohort_of_scores(minkpp=scores)
    by_score = topk_jaccard_detector(cohort, _cfg(top_k=1)).table.set_index(["model_a", "model_b"])
    assert by_score.loc[("m0", "m1"), "intersection"] == 1  # example 0 tops both
    # Deltas (score - mean of the other two): m0 [3, 0, 0, -1.5], m1 [1.5, 0, 0, 3].
    by_delta = topk_jaccard_detector(cohort, _cfg(top_k=1, rank_by="delta")).table.set_index(["model_a", "model_b"])
    assert by_delta.loc[("m0", "m1"), "intersection"] == 0
    with pytest.raises(ValueError, match="at least 2 reference models"):
        topk_jaccard_detector(cohort_of_scores(minkpp=scores[:, :2]), _cfg(rank_by="delta"))
    with pytest.raises(ValueError, match="1 <= K"):
        topk_jaccard_detector(cohort, _cfg(top_k=5))


def test_null_false_positive_rate_matches_the_exact_size():
    """Independent scores: each intersection is hypergeometric and, given the target's set, the
    target's pairs are independent, so the test's exact size follows from scipy alone."""
    n, k, references, alpha, trials = 200, 10, 2, 0.05, 800
    x_star = next(x for x in range(k + 1) if references * hypergeom.sf(x - 1, n, k, k) < alpha)
    size = 1 - (1 - hypergeom.sf(x_star - 1, n, k, k)) ** references
    cfg = _cfg(top_k=k, alpha=alpha)
    rejections = [
        topk_jaccard_detector(cohort_of_scores(minkpp=np.random.default_rng(seed).normal(size=(n, 3))), cfg).metrics["p_value"] < alpha
        for seed in range(trials)
    ]
    low, high = false_positive_band(size, trials)
    assert low <= np.mean(rejections) <= high
    assert size <= alpha


def test_planted_shared_top_set_is_detected():
    n, k = 200, 10
    for seed in range(20):
        rng = np.random.default_rng(seed)
        scores = rng.normal(size=(n, 4))
        shared = rng.choice(n, size=k, replace=False)
        scores[shared, 0] += 10.0
        scores[shared, 2] += 10.0  # the target and m2 saw the same examples
        result = topk_jaccard_detector(cohort_of_scores(minkpp=scores), _cfg(top_k=k))
        assert result.metrics["flag"] == 1.0 and result.metrics["p_value"] < 1e-10
        flagged = result.table[result.table["flag"]]
        assert list(zip(flagged["model_a"], flagged["model_b"])) == [("m0", "m2")]
