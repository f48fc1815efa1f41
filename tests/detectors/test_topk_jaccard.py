"""topk_jaccard: pairwise top-K overlap by hand, the exact null size of the hypergeometric test,
the cohort-relabel test against an enumeration and its size where the hypergeometric test is
liberal, and planted shared sets."""

import itertools
from math import comb

import numpy as np
import pytest
from scipy.stats import hypergeom

from medexp.detectors import topk_jaccard_detector
from tests.detectors.synthetic import cohort_of_scores, config, false_positive_band


def _cfg(**overrides):
    # the hypergeometric tests below need no relabel draws beyond the one the detector always logs
    values = dict(alpha=0.01, top_k=2, k_percent=20.0, rank_by="score", flag_lift=10.0, null="hypergeometric",
                  n_permutations=1)
    return config(**{**values, **overrides})


def detect(cohort, cfg, seed=0):
    return topk_jaccard_detector(cohort, cfg, seed)


def test_pairs_by_hand():
    scores = np.column_stack([
        [8, 7, 1, 1, 1, 1, 1, 0],  # m0 (target): top-2 {0, 1}
        [9, 1, 8, 1, 1, 1, 1, 1],  # m1: {0, 2}
        [1, 1, 1, 1, 1, 1, 9, 8],  # m2: {6, 7}
    ])
    result = detect(cohort_of_scores(minkpp=scores), _cfg())
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
    significant = detect(cohort, _cfg(flag_lift=4.0, alpha=0.1))
    assert significant.metrics["p_value"] == pytest.approx(1 / 14) and significant.metrics["flag"] == 1.0
    assert detect(cohort, _cfg(flag_lift=4.0, alpha=0.05)).metrics["flag"] == 0.0
    assert detect(cohort, _cfg(flag_lift=5.0, alpha=0.1)).metrics["flag"] == 0.0


def test_rank_by_delta_removes_shared_easiness():
    scores = np.column_stack([[5, 0, 0, 0], [4, 0, 0, 3], [0, 0, 0, 0]])
    cohort = cohort_of_scores(minkpp=scores)
    by_score = detect(cohort, _cfg(top_k=1)).table.set_index(["model_a", "model_b"])
    assert by_score.loc[("m0", "m1"), "intersection"] == 1  # example 0 tops both
    # Deltas (score - mean of the other two): m0 [3, 0, 0, -1.5], m1 [1.5, 0, 0, 3].
    by_delta = detect(cohort, _cfg(top_k=1, rank_by="delta")).table.set_index(["model_a", "model_b"])
    assert by_delta.loc[("m0", "m1"), "intersection"] == 0
    with pytest.raises(ValueError, match="at least 2 reference models"):
        detect(cohort_of_scores(minkpp=scores[:, :2]), _cfg(rank_by="delta"))
    with pytest.raises(ValueError, match="1 <= K"):
        detect(cohort, _cfg(top_k=5))


@pytest.mark.extended
def test_null_false_positive_rate_matches_the_exact_size():
    """Independent scores: each intersection is hypergeometric and, given the target's set, the
    target's pairs are independent, so the test's exact size follows from scipy alone."""
    n, k, references, alpha, trials = 200, 10, 2, 0.05, 800
    x_star = next(x for x in range(k + 1) if references * hypergeom.sf(x - 1, n, k, k) < alpha)
    size = 1 - (1 - hypergeom.sf(x_star - 1, n, k, k)) ** references
    cfg = _cfg(top_k=k, alpha=alpha)
    rejections = [
        detect(cohort_of_scores(minkpp=np.random.default_rng(seed).normal(size=(n, 3))), cfg).metrics["p_value"] < alpha
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
        result = detect(cohort_of_scores(minkpp=scores), _cfg(top_k=k))
        assert result.metrics["flag"] == 1.0 and result.metrics["p_value"] < 1e-10
        flagged = result.table[result.table["flag"]]
        assert list(zip(flagged["model_a"], flagged["model_b"])) == [("m0", "m2")]


def _exact_relabel_p(scores: np.ndarray, k: int, by_delta: bool) -> float:
    """The relabel test's exact p-value: every assignment of each example's scores to the models,
    enumerated (the permutation draws are uniform over these)."""
    from medexp.stats.cohort import deltas_vs_cohort, top_k_indices

    def largest(matrix):
        ranked = deltas_vs_cohort(matrix) if by_delta else matrix
        tops = [set(top_k_indices(ranked[:, j], k).tolist()) for j in range(matrix.shape[1])]
        return max(len(tops[0] & tops[j]) for j in range(1, matrix.shape[1]))

    observed = largest(scores)
    orders = list(itertools.permutations(range(scores.shape[1])))
    draws = [largest(np.array([row[list(order)] for row, order in zip(scores, assignment)]))
             for assignment in itertools.product(orders, repeat=scores.shape[0])]
    return float(np.mean(np.array(draws) >= observed))


@pytest.mark.parametrize("by_delta", [False, True])
def test_relabel_p_value_matches_the_enumerated_permutation_distribution(by_delta):
    scores = np.array([[3.0, 2.5, 0.1], [2.0, 1.9, 0.3], [0.2, 0.1, 1.5], [0.4, 0.3, 2.0]])  # m0 and m1 rank alike
    exact = _exact_relabel_p(scores, k=2, by_delta=by_delta)
    draws = 4000
    result = detect(cohort_of_scores(minkpp=scores), _cfg(null="relabel", n_permutations=draws,
                                                          rank_by="delta" if by_delta else "score"), seed=7)
    # p = (1 + exceed) / (1 + P): within 4 binomial standard errors of the exact tail
    assert result.metrics["p_value"] == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / draws) + 1 / draws)
    assert result.metrics["p_value"] == result.metrics["p_value_relabel"]


def _heteroscedastic_cohort(rng, n=300, models=5):
    """Independent models whose scores spread more on some examples than on others: no two models
    share any exposure, but every model's largest deltas fall on the wide examples."""
    spread = np.where(rng.random(n) < 0.05, 6.0, 0.5)
    return rng.normal(size=(n, 1)) + spread[:, None] * rng.normal(size=(n, models))


@pytest.mark.extended
def test_relabel_test_holds_its_size_where_the_hypergeometric_test_does_not():
    alpha, trials = 0.05, 120
    hypergeometric, relabel = [], []
    for seed in range(trials):
        scores = _heteroscedastic_cohort(np.random.default_rng(seed))
        result = detect(cohort_of_scores(minkpp=scores), _cfg(top_k=10, rank_by="delta", null="relabel",
                                                              n_permutations=99), seed=seed)
        hypergeometric.append(result.metrics["p_value_hypergeometric"] < alpha)
        relabel.append(result.metrics["p_value"] < alpha)
    low, high = false_positive_band(alpha, trials)
    assert low <= np.mean(relabel) <= high
    assert np.mean(hypergeometric) > 4 * alpha  # the uniform-K-set null is far too liberal here


def test_relabel_test_detects_a_planted_shared_top_set():
    rng = np.random.default_rng(3)
    scores = _heteroscedastic_cohort(rng)
    shared = rng.choice(scores.shape[0], size=10, replace=False)
    scores[shared, 0] += 10.0
    scores[shared, 3] += 10.0  # the target and m3 saw the same examples
    result = detect(cohort_of_scores(minkpp=scores), _cfg(top_k=10, rank_by="delta", null="relabel",
                                                          n_permutations=199), seed=1)
    assert result.metrics["p_value"] == pytest.approx(1 / 200)  # no draw reaches the observed overlap
    assert result.metrics["flag"] == 1.0
    flagged = result.table[result.table["flag"]]
    assert list(zip(flagged["model_a"], flagged["model_b"])) == [("m0", "m3")]
