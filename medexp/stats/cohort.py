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
_BLOCK_VALUES = 1 << 20  # scores per block of relabelled matrices (8 MiB of float64)


def deltas_vs_cohort(scores) -> np.ndarray:
    """``delta[i, j] = scores[i, j] - median over l != j of scores[i, l]`` for every model j."""
    return _deltas(_score_matrix(scores, min_models=3, what="deltas_vs_cohort"))


def _deltas(matrix: np.ndarray) -> np.ndarray:
    """:func:`deltas_vs_cohort` over the last axis (the models) of any stack of score matrices.

    Each row is sorted once. Removing a model's score from the sorted row leaves the others in
    order, so the i-th smallest of the others is the row's i-th value below the model's rank and
    the (i + 1)-th from it on; the median of the others averages the same one or two values that
    ``np.median`` of them would, so the result is identical, without one median per model. Tied
    scores share the lowest rank among them: removing any one of equal values leaves the same
    others."""
    ordered = np.sort(matrix, axis=-1)
    rank = np.zeros(matrix.shape, dtype=np.intp)
    for model in range(matrix.shape[-1]):
        rank += matrix[..., model : model + 1] < matrix

    def others_at(index: int) -> np.ndarray:  # the index-th smallest of the others, per model
        return np.where(index >= rank, ordered[..., index + 1 : index + 2], ordered[..., index : index + 1])

    middle = (matrix.shape[-1] - 1) // 2
    median = others_at(middle) if (matrix.shape[-1] - 1) % 2 else (others_at(middle - 1) + others_at(middle)) / 2
    return matrix - median


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
    observed = int(_largest_target_overlaps(matrix[np.newaxis], k, by_delta)[0])
    rng = np.random.default_rng(seed)
    columns = np.tile(np.arange(n_models), (n_examples, 1))
    null = np.empty(n_permutations, dtype=np.int64)
    block = max(1, _BLOCK_VALUES // matrix.size)
    for start in range(0, n_permutations, block):
        count = min(block, n_permutations - start)
        # one relabelling at a time from the stream, so the p-value does not depend on the block size
        orders = np.stack([rng.permuted(columns, axis=1) for _ in range(count)])
        relabelled = np.take_along_axis(np.broadcast_to(matrix, orders.shape), orders, axis=2)
        null[start : start + count] = _largest_target_overlaps(relabelled, k, by_delta)
    n_exceed = int(np.count_nonzero(null >= observed))
    return OverlapRelabelResult(observed, (1 + n_exceed) / (1 + n_permutations), n_permutations, n_exceed,
                                float(null.mean()))


def _largest_target_overlaps(stack: np.ndarray, k: int, by_delta: bool) -> np.ndarray:
    """Per (examples, models) matrix of ``stack``, the target's (column 0) largest top-K overlap
    with another column."""
    ranked = _deltas(stack) if by_delta else stack
    member = top_k_mask(ranked, k, axis=1)
    return (member[..., :1] & member[..., 1:]).sum(axis=1).max(axis=1)


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
    """Indices, ascending, of the k highest scores; ties go to the earlier example, so the set is
    deterministic."""
    values = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"top-K: {int(np.sum(~np.isfinite(values)))} scores are NaN or infinite")
    return np.flatnonzero(top_k_mask(values, k))


def top_k_mask(values: np.ndarray, k: int, axis: int = 0) -> np.ndarray:
    """Boolean mask of the k highest values along ``axis`` of an array of any shape; ties go to
    the earlier position: every value above the k-th highest, then the earliest equal to it.
    One rule for a single ranking (:func:`top_k_indices`) and for stacks of relabelled cohorts.
    A NaN is never above or equal to anything, so its slice would get fewer than k: callers pass
    checked values (:func:`top_k_indices`, :func:`_score_matrix`)."""
    size = values.shape[axis]
    if not 1 <= k <= size:
        raise ValueError(f"top-K needs 1 <= K <= number of examples ({size}), got K={k}")
    kth = np.take(np.partition(values, size - k, axis=axis), [size - k], axis=axis)
    above, at = values > kth, values == kth
    if at.sum(axis=axis).max() > 1:  # ties at the k-th value: only the earliest that fit
        at &= np.cumsum(at, axis=axis) <= k - above.sum(axis=axis, keepdims=True)
    return above | at


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
