"""Multiple-testing corrections over a family of p-values (SciPy does the work)."""

from __future__ import annotations

import numpy as np

METHODS = ("bonferroni", "bh")


def adjust_pvalues(p, method: str) -> np.ndarray:
    """Adjusted p-values of a test family, returned in the input order.

    ``"bonferroni"``: min(1, m p), controlling the family-wise error rate.
    ``"bh"``: Benjamini-Hochberg q-values (``scipy.stats.false_discovery_control``),
    controlling the false discovery rate; reject where q <= the chosen FDR level.
    """
    values = np.asarray(p, dtype=np.float64)
    if method not in METHODS:
        raise ValueError(f"unknown multiple-testing method {method!r}; choose one of {list(METHODS)}")
    if values.ndim != 1:
        raise ValueError(f"adjust_pvalues needs a 1-d array of p-values, got shape {values.shape}")
    if values.size == 0:
        raise ValueError("adjust_pvalues needs at least one p-value, got none")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"adjust_pvalues: {int(np.sum(~np.isfinite(values)))} p-values are NaN or infinite")
    outside = (values < 0) | (values > 1)
    if outside.any():
        raise ValueError(f"p-values must lie in [0, 1]; {int(outside.sum())} do not (first: {values[outside][0]!r})")
    if method == "bonferroni":
        return np.minimum(1.0, values.size * values)
    from scipy.stats import false_discovery_control

    return np.asarray(false_discovery_control(values, method="bh"), dtype=np.float64)
