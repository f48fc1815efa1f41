"""Cohort statistics: how one model's per-example scores stand out from other models'.

Shared by the cohort detectors (mink_tail, topk_jaccard, loss): a score matrix has one row per
example and one column per cohort model, and a model's per-example *delta* is its score minus
the median score of the other models on the same example (Detector 3 of the controlled audit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Null draws are generated in blocks of this many permutations.
_BLOCK = 64


def deltas_vs_cohort(scores) -> np.ndarray:
    """``delta[i, j] = scores[i, j] - median over l != j of scores[i, l]`` for every model j."""
    matrix = _score_matrix(scores, min_models=3, what="deltas_vs_cohort")
    deltas = np.empty_like(matrix)
    for column in range(matrix.shape[1]):
        others = np.delete(matrix, column, axis=1)
        deltas[:, column] = matrix[:, column] - np.median(others, axis=1)
    return deltas


@dataclass(frozen=True)
class CohortRelabelResult:
    """Outcome of :func:`cohort_relabel_test`; ``n_exceed`` lets refined draws be pooled."""

    statistic: float  # mean over examples of the target's contribution
    p_value: float
    n_permutations: int
    n_exceed: int
    null_mean: float
    null_std: float


def cohort_relabel_test(
    contributions, target: int, n_permutations: int = 10_000, seed: int = 0
) -> CohortRelabelResult:
    """One-sided permutation test that the target model stands out from its cohort.

    ``contributions[i, j]`` is what example i adds to the statistic when model j is the target
    (for example 1[delta_ij > 100]). The statistic is the mean over examples of the target's
    column. Null hypothesis: on every example the cohort's models are exchangeable, so the
    model in the target's place is a uniformly random column, drawn independently per example.
    p = (1 + #{T(null) >= T(observed)}) / (1 + P), so the smallest reportable p is 1 / (P + 1).
    """
    matrix = _score_matrix(contributions, min_models=2, what="cohort_relabel_test")
    n_examples, n_models = matrix.shape
    if not 0 <= target < n_models:
        raise ValueError(f"target column {target} is outside the {n_models} cohort columns")
    if n_permutations < 1:
        raise ValueError("n_permutations must be >= 1")
    rows = np.arange(n_examples)
    observed = float(matrix[rows, target].sum())
    rng = np.random.default_rng(seed)
    null = np.empty(n_permutations, dtype=np.float64)
    for start in range(0, n_permutations, _BLOCK):
        count = min(_BLOCK, n_permutations - start)
        columns = rng.integers(0, n_models, size=(count, n_examples))
        null[start : start + count] = matrix[rows, columns].sum(axis=1)
    n_exceed = int(np.count_nonzero(null >= observed))
    return CohortRelabelResult(
        statistic=observed / n_examples,
        p_value=(1 + n_exceed) / (1 + n_permutations),
        n_permutations=n_permutations,
        n_exceed=n_exceed,
        null_mean=float(null.mean() / n_examples),
        null_std=float(null.std() / n_examples),
    )


@dataclass(frozen=True)
class OverlapRelabelResult:
    """Outcome of :func:`cohort_relabel_overlap_test`."""

    max_intersection: int  # the target's largest top-K overlap with any reference
    p_value: float
    n_permutations: int
    n_exceed: int
    null_mean: float  # mean of the largest overlap under the null


def cohort_relabel_overlap_test(scores, k: int, by_delta: bool, n_permutations: int = 10_000,
                                seed: int = 0) -> OverlapRelabelResult:
    """One-sided permutation test that the target (column 0) shares more of its top-K examples
    with some reference than a cohort member in its place would.

    The statistic is the target's largest overlap |top-K(target) n top-K(reference)| over the
    references, each model's top-K taken from its scores or, with ``by_delta``, from its deltas
    against the median of the others (:func:`deltas_vs_cohort`). Null hypothesis, as in
    :func:`cohort_relabel_test`: on every example the cohort's models are exchangeable, so each
    draw permutes every example's scores among the models independently and recomputes the
    deltas, the top-K sets and the statistic. Unlike the hypergeometric tail of
    :func:`top_k_overlap`, which takes each top-K set as a uniformly random K-set, this null keeps
    what the examples share: examples on which the models' scores spread widely, and deltas of
    two models measured against medians over the same other models, put the same examples in
    every model's top-K more often than chance (the offline demo's clean models share 3 to 4 of
    their top 10 out of 400, where chance is 0.25). p = (1 + #{null >= observed}) / (1 + P).
    """
    matrix = _score_matrix(scores, min_models=3 if by_delta else 2, what="cohort_relabel_overlap_test")
    n_examples, n_models = matrix.shape
    if not 1 <= k <= n_examples:
        raise ValueError(f"top-K needs 1 <= K <= number of examples ({n_examples}), got K={k}")
    if n_permutations < 1:
        raise ValueError("n_permutations must be >= 1")
    observed = _largest_target_overlap(matrix, k, by_delta)
    rng = np.random.default_rng(seed)
    columns = np.tile(np.arange(n_models), (n_examples, 1))
    null = np.array([_largest_target_overlap(np.take_along_axis(matrix, rng.permuted(columns, axis=1), axis=1),
                                             k, by_delta) for _ in range(n_permutations)])
    n_exceed = int(np.count_nonzero(null >= observed))
    return OverlapRelabelResult(observed, (1 + n_exceed) / (1 + n_permutations), n_permutations, n_exceed,
                                float(null.mean()))


def _largest_target_overlap(matrix: np.ndarray, k: int, by_delta: bool) -> int:
    ranked = deltas_vs_cohort(matrix) if by_delta else matrix
    # the k highest of each column, ties to the earlier example, as top_k_indices
    tops = np.argsort(-ranked, axis=0, kind="stable")[:k]
    member = np.zeros(ranked.shape, dtype=bool)
    member[tops, np.arange(ranked.shape[1])] = True
    return int((member[:, :1] & member[:, 1:]).sum(axis=0).max())


def _score_matrix(values, min_models: int, what: str) -> np.ndarray:
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"{what} needs a non-empty (examples, models) matrix, got shape {matrix.shape}")
    if matrix.shape[1] < min_models:
        raise ValueError(f"{what} needs at least {min_models} cohort models, got {matrix.shape[1]}")
    if not np.all(np.isfinite(matrix)):
        raise ValueError(f"{what}: {int(np.sum(~np.isfinite(matrix)))} scores are NaN or infinite")
    return matrix


def top_k_indices(scores, k: int) -> np.ndarray:
    """Indices of the k highest scores; ties go to the earlier example, so the set is deterministic."""
    values = np.asarray(scores, dtype=np.float64)
    if not 1 <= k <= values.size:
        raise ValueError(f"top-K needs 1 <= K <= number of examples ({values.size}), got K={k}")
    return np.argsort(-values, kind="stable")[:k]


@dataclass(frozen=True)
class TopKOverlap:
    """Overlap of two top-K sets drawn from the same n examples."""

    intersection: int
    jaccard: float
    expected: float  # K^2 / n: the mean intersection of two independent random K-sets
    lift: float  # intersection / expected
    p_value: float  # P[X >= intersection] for X ~ Hypergeometric(n, K, K)


def top_k_overlap(set_a, set_b, n_examples: int) -> TopKOverlap:
    """Intersection, Jaccard, chance expectation, lift and hypergeometric tail of two K-sets."""
    from scipy.stats import hypergeom

    a, b = set(np.asarray(set_a).tolist()), set(np.asarray(set_b).tolist())
    if len(a) != len(b) or not 1 <= len(a) <= n_examples:
        raise ValueError(f"top-K sets must have the same size K with 1 <= K <= n={n_examples}, got {len(a)} and {len(b)}")
    k = len(a)
    shared = len(a & b)
    expected = k * k / n_examples
    return TopKOverlap(
        intersection=shared,
        jaccard=shared / len(a | b),
        expected=expected,
        lift=shared / expected,
        p_value=float(hypergeom.sf(shared - 1, n_examples, k, k)),
    )
