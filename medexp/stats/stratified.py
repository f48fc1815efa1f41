"""Two independent proportions compared within strata: the Mantel-Haenszel risk difference with
Sato's variance, and the exact conditional test of the first proportion above the second.

Stratum k holds ``n_first[k]`` units of the first group, ``events_first[k]`` of which had the
event, and ``n_second[k]`` / ``events_second[k]`` of the second (the images of an audited
benchmark and of a control set, the event: naming the audited benchmark; the strata: modality).

- The Mantel-Haenszel risk difference RD = sum_k w_k (p1_k - p0_k) / sum_k w_k with
  w_k = n1_k n0_k / N_k, and its Wald interval with Sato's (1989) variance, which stays valid
  with many small strata (Rothman, Greenland & Lash, *Modern Epidemiology*, 3rd ed., ch. 15).
- The exact conditional test (Birch 1964; the exact form of the Cochran-Mantel-Haenszel test):
  given each stratum's margins, the first group's event count A_k is hypergeometric when the
  event does not depend on the group, independently across strata; p = P(sum_k A_k >= observed),
  the convolution of the strata's hypergeometric laws. Given the margins,
  sum_k w_k (p1_k - p0_k) = sum_k (A_k - E[A_k]), so this is also the exact permutation test of
  the MH risk difference with the group labels permuted within strata: no draws, no seed, and
  with a single stratum it is Fisher's exact test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class RiskDifference:
    estimate: float  # sum_k w_k (p1_k - p0_k) / sum_k w_k
    low: float  # Wald interval with Sato's variance
    high: float
    variance: float
    n_strata: int
    confidence: float


def _counts(events_first, n_first, events_second, n_second) -> tuple[np.ndarray, ...]:
    arrays = tuple(np.asarray(values, dtype=np.int64).reshape(-1)
                   for values in (events_first, n_first, events_second, n_second))
    if len({array.size for array in arrays}) != 1:
        raise ValueError(f"every stratum needs four counts, got lengths {[array.size for array in arrays]}")
    a, n1, c, n0 = arrays
    if a.size == 0:
        raise ValueError("no stratum to compare")
    if (n1 < 1).any() or (n0 < 1).any():
        raise ValueError("every stratum needs units of both groups (drop the others before comparing)")
    if (a < 0).any() or (a > n1).any() or (c < 0).any() or (c > n0).any():
        raise ValueError("event counts must lie between 0 and their group's size")
    return arrays


def mantel_haenszel_difference(events_first, n_first, events_second, n_second,
                               confidence: float = 0.95) -> RiskDifference:
    """The Mantel-Haenszel risk difference of the first group over the second, with Sato's interval."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    a, n1, c, n0 = (array.astype(np.float64) for array in _counts(events_first, n_first, events_second, n_second))
    total = n1 + n0
    weight = n1 * n0 / total
    estimate = float(np.sum(weight * (a / n1 - c / n0)) / weight.sum())
    # Sato (1989): Var = (RD * P + Q) / W^2
    p_term = np.sum((n1**2 * c - n0**2 * a + n1 * n0 * (n0 - n1) / 2) / total**2)
    q_term = np.sum((a * (n0 - c) + c * (n1 - a)) / (2 * total))
    variance = max(float((estimate * p_term + q_term) / weight.sum() ** 2), 0.0)
    half = float(sps.norm.ppf(0.5 + confidence / 2)) * math.sqrt(variance)
    return RiskDifference(estimate, estimate - half, estimate + half, variance, int(a.size), confidence)


def exact_stratified_greater(events_first, n_first, events_second, n_second) -> float:
    """One-sided exact conditional p-value that the first group has the event more often than the
    second, within strata: P(sum_k A_k >= sum_k events_first[k]) under the product of the strata's
    hypergeometric laws (each stratum's margins fixed)."""
    a, n1, c, n0 = _counts(events_first, n_first, events_second, n_second)
    law = np.ones(1)
    for size_first, size, events in zip(n1, n1 + n0, a + c):
        support = np.arange(min(size_first, events) + 1)
        law = np.convolve(law, sps.hypergeom.pmf(support, size, events, size_first))
    return float(min(1.0, law[int(a.sum()):].sum()))
