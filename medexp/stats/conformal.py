"""Per-example membership: conformal p-values against the non-members, and Benjamini-Hochberg.

For a member scoring s (higher: "member"), p = (1 + #{non-member scores >= s}) / (1 + n0):
the rank of s among the n0 non-members and itself, ties counted against it. When the member is
exchangeable with the non-members (nothing memorised), p is super-uniform, P(p <= t) <= t; with
n0 non-members it moves in steps of 1 / (1 + n0), so no item can reach a p below that floor.
Conformal p-values sharing one calibration set are positively dependent (PRDS; Bates et al.,
2023, "Testing for outliers with conformal p-values"), so Benjamini-Hochberg over the members
controls the false-discovery rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from medexp.stats.multiple_testing import adjust_pvalues


@dataclass(frozen=True)
class ConformalDiscoveries:
    """Per tested item (in the input order): its conformal p, its BH q, and whether q <= fdr."""

    p_values: np.ndarray
    q_values: np.ndarray
    discovered: np.ndarray  # bool


def conformal_pvalues(scores, reference) -> np.ndarray:
    """(1 + #{reference >= s}) / (1 + len(reference)) for every s in ``scores``."""
    scores = np.asarray(scores, dtype=np.float64)
    reference = np.sort(np.asarray(reference, dtype=np.float64))
    if reference.ndim != 1 or reference.size == 0:
        raise ValueError("conformal p-values need a non-empty 1-d array of reference scores")
    if not (np.all(np.isfinite(scores)) and np.all(np.isfinite(reference))):
        raise ValueError("conformal p-values need finite scores")
    at_least = reference.size - np.searchsorted(reference, scores, side="left")
    return (1.0 + at_least) / (1.0 + reference.size)


def conformal_discoveries(scores, reference, fdr: float) -> ConformalDiscoveries:
    """Conformal p-values of ``scores`` against ``reference``, BH q-values over them, and the
    items discovered at false-discovery rate ``fdr``."""
    if not 0 < fdr < 1:
        raise ValueError(f"fdr must be in (0, 1), got {fdr}")
    p_values = conformal_pvalues(scores, reference)
    q_values = adjust_pvalues(p_values, "bh")
    return ConformalDiscoveries(p_values, q_values, q_values <= fdr)
