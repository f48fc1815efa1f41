"""ROC statistics of membership scores: AUC with a bootstrap interval and a permutation test,
TPR at a fixed FPR, and the Youden point.

Scores are oriented so that higher means "member". A score array is (n,) or (rows, n), one row
per model attacked on the same examples (the seed pairs of a differential audit): the AUC of
several rows is the mean of the rows' AUCs, and resampling or relabelling applies one draw to
every row, because the rows share the examples. Built on scikit-learn (roc_auc_score,
roc_curve) and SciPy (bootstrap, permutation_test); every random draw comes from ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class AUCTest:
    """One-sided permutation test that members score higher than non-members.

    p = (1 + #{AUC(relabelled) >= AUC}) / (1 + n_permutations); the unit relabelled is the
    example (membership labels permuted over the examples, the same permutation for every row).
    """

    auc: float
    p_value: float
    n_permutations: int
    null_mean: float
    null_std: float


@dataclass(frozen=True)
class YoudenPoint:
    """The threshold maximising TPR - FPR (scores >= threshold are called members) and the
    accuracy of that call on the same examples (in-sample: an optimistic figure)."""

    threshold: float
    tpr: float
    fpr: float
    accuracy: float


def _checked(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    matrix = scores[None, :] if scores.ndim == 1 else scores
    if matrix.ndim != 2 or matrix.shape[1] != labels.size:
        raise ValueError(f"scores of shape {scores.shape} do not match {labels.size} labels")
    if labels.all() or not labels.any():
        raise ValueError(f"an AUC needs members and non-members, got {int(labels.sum())} members of {labels.size}")
    bad = int(np.sum(~np.isfinite(matrix)))
    if bad:
        raise ValueError(f"{bad} membership scores are NaN or infinite")
    return labels, matrix


def mean_auc(labels, scores) -> float:
    """ROC AUC (scikit-learn, ties count one half), averaged over the rows of ``scores``."""
    from sklearn.metrics import roc_auc_score

    labels, matrix = _checked(labels, scores)
    return float(np.mean([roc_auc_score(labels, row) for row in matrix]))


def _mean_ranks(matrix: np.ndarray) -> np.ndarray:
    """Per example, its mid-rank among the examples, averaged over the rows."""
    return sps.rankdata(matrix, axis=1).mean(axis=0)


def auc_permutation_test(labels, scores, n_permutations: int, seed: int) -> AUCTest:
    """Permutation test of the (mean) AUC against chance; see :class:`AUCTest`.

    The AUC is a function of the members' ranks, (sum of ranks - n1 (n1 + 1) / 2) / (n1 n0);
    averaged over rows it depends only on each example's mean rank, so relabelling permutes
    one vector.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    labels, matrix = _checked(labels, scores)
    ranks = _mean_ranks(matrix)
    n1, n0 = int(labels.sum()), int((~labels).sum())

    def statistic(members, nonmembers, axis=-1):
        return (members.sum(axis=axis) - n1 * (n1 + 1) / 2) / (n1 * n0)

    result = sps.permutation_test(
        (ranks[labels], ranks[~labels]), statistic, permutation_type="independent", vectorized=True,
        n_resamples=n_permutations, alternative="greater", rng=np.random.default_rng(seed),
    )
    null = np.asarray(result.null_distribution)
    return AUCTest(float(result.statistic), float(result.pvalue), int(null.size), float(null.mean()), float(null.std()))


def auc_bootstrap_ci(labels, scores, n_resamples: int, level: float, seed: int) -> tuple[float, float]:
    """Percentile interval of the (mean) AUC: members and non-members resampled with replacement,
    each group on its own (a stratified bootstrap; unit: example), one draw for every row."""
    labels, matrix = _checked(labels, scores)
    members, nonmembers = matrix[:, labels], matrix[:, ~labels]
    n1, n0 = members.shape[1], nonmembers.shape[1]

    def statistic(member_index, nonmember_index, axis=-1):
        # indices arrive as floats of shape (..., n); every row is resampled alike
        picked_m = members[:, member_index.astype(np.intp)]  # (rows, ..., n1)
        picked_n = nonmembers[:, nonmember_index.astype(np.intp)]
        u = sps.mannwhitneyu(picked_m, picked_n, axis=-1, method="asymptotic", use_continuity=False).statistic
        return (u / (n1 * n0)).mean(axis=0)

    result = sps.bootstrap(
        (np.arange(n1, dtype=np.float64), np.arange(n0, dtype=np.float64)), statistic, vectorized=True,
        n_resamples=n_resamples, confidence_level=level, method="percentile", rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def tpr_at_fpr(labels, scores, fpr: float) -> float:
    """The highest TPR reachable at a false-positive rate of at most ``fpr``, mean over rows.

    With n0 non-members the FPR moves in steps of 1/n0: below that step this is the TPR at zero
    false positives."""
    from sklearn.metrics import roc_curve

    if not 0 <= fpr <= 1:
        raise ValueError(f"fpr must be in [0, 1], got {fpr}")
    labels, matrix = _checked(labels, scores)
    values = []
    for row in matrix:
        fprs, tprs, _ = roc_curve(labels, row, drop_intermediate=False)
        values.append(tprs[fprs <= fpr].max())
    return float(np.mean(values))


def youden_point(labels, scores) -> YoudenPoint:
    """The Youden point of one score vector (see :class:`YoudenPoint`)."""
    from sklearn.metrics import roc_curve

    labels, matrix = _checked(labels, scores)
    if matrix.shape[0] != 1:
        raise ValueError("youden_point takes one score vector")
    row = matrix[0]
    fprs, tprs, thresholds = roc_curve(labels, row, drop_intermediate=False)
    best = int(np.argmax(tprs - fprs))
    threshold = float(thresholds[best])
    accuracy = float(np.mean((row >= threshold) == labels))
    return YoudenPoint(threshold, float(tprs[best]), float(fprs[best]), accuracy)
