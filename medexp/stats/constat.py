"""A ConStat-style contamination estimate (Dekoninck et al. 2024): the candidate's benchmark
accuracy minus the accuracy an uncontaminated model of the same ability would reach.

Ability is the accuracy on a *reference benchmark* measuring the same skill on items the candidate
cannot have memorised (in medexp the perturbed twins of the benchmark's items). Over ``M >= 5``
clean *reference models* asked the same items, a least-squares line maps reference-benchmark
accuracy to benchmark accuracy (ConStat fits a smooth monotone function; with five to ten models
a line has the fewest parameters and extrapolates least wildly); the candidate's **expected**
benchmark accuracy is the line at its own reference-benchmark accuracy, and its **inflation** is
observed minus expected.

Uncertainty: a percentile bootstrap that in every draw resamples the items (clustered by image,
as :mod:`medexp.stats.inflation` does: items sharing an image travel together, for the candidate
and every reference model alike) *and* the reference models (``M`` draws with replacement), then
refits the line, so the interval carries the candidate's and the references' sampling noise and
the choice of references. A draw whose resampled references share one reference accuracy has no
line; it is left out and counted (``n_valid``). The p-value of "no inflation" is ConStat's: the
share of valid draws whose inflation is ``<= 0``; its resolution is ``1 / n_valid`` (0 means
below that, never exactly 0).

The draws are seeded: items from :func:`medexp.stats.bootstrap.cluster_multiplicities` at
``seed``, reference models from a stream derived from it, so a seed reproduces the result exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Hashable, Optional

import numpy as np

from medexp.kernel.hashing import derive_seed
from medexp.stats.bootstrap import N_RESAMPLES, cluster_multiplicities, percentile_interval
from medexp.stats.inflation import IMAGE, ITEM, cluster_index

MIN_REFERENCES = 5  # ConStat's smallest reference set: fewer models cannot pin down the fit


@dataclass(frozen=True)
class ConStat:
    observed: float  # the candidate's benchmark accuracy (a fraction)
    expected: float  # the fitted line at the candidate's reference-benchmark accuracy
    inflation: float  # observed - expected
    low: float
    high: float
    p_value: float  # share of valid draws with inflation <= 0 (resolution 1 / n_valid)
    intercept: float
    slope: float
    n_references: int
    n_valid: int  # draws with a defined fit
    n_resamples: int
    unit: str  # "image" (items sharing an image travel together) or "item"
    n_clusters: int
    n_items: int
    confidence: float

    def metrics(self) -> dict[str, float]:
        """``constat_expected``, ``constat_inflation``, ``constat_ci_low``, ``constat_ci_high``,
        ``constat_p_value`` and ``constat_n_references``."""
        return {"constat_expected": self.expected, "constat_inflation": self.inflation,
                "constat_ci_low": self.low, "constat_ci_high": self.high, "constat_p_value": self.p_value,
                "constat_n_references": float(self.n_references)}


def constat_inflation(candidate: np.ndarray, references: np.ndarray,
                      images: Optional[Sequence[Optional[Hashable]]] = None, n_resamples: int = N_RESAMPLES,
                      seed: int = 0, confidence: float = 0.95) -> ConStat:
    """The candidate's inflation above the reference models' line, with its bootstrap interval.

    ``candidate``: ``(items, 2)`` outcomes (fractions in [0, 1]), column 0 on the benchmark, column
    1 on the reference benchmark; ``references``: ``(models, items, 2)``, the same for each clean
    reference model on the same items in the same order; ``images``: each item's image (None: its
    own cluster; ``images`` None: every item its own).
    """
    candidate = np.asarray(candidate, dtype=np.float64)
    references = np.asarray(references, dtype=np.float64)
    if candidate.ndim != 2 or candidate.shape[1] != 2 or candidate.shape[0] == 0:
        raise ValueError(f"candidate must be an (items, 2) matrix with at least one item, got {candidate.shape}")
    if references.ndim != 3 or references.shape[1:] != candidate.shape:
        raise ValueError(f"references must be a (models, items, 2) array on the candidate's {candidate.shape[0]} "
                         f"items, got {references.shape}")
    n_models, n_items = references.shape[0], candidate.shape[0]
    if n_models < MIN_REFERENCES:
        raise ValueError(f"a ConStat estimate needs at least {MIN_REFERENCES} reference models, got {n_models}")
    clusters = cluster_index(images, n_items)
    n_clusters = int(clusters.max()) + 1
    # per-cluster sums: candidate (benchmark, reference), each model's benchmark, each model's reference, items
    columns = np.column_stack([candidate, references[:, :, 0].T, references[:, :, 1].T, np.ones(n_items)])
    totals = np.zeros((n_clusters, columns.shape[1]))
    np.add.at(totals, clusters, columns)

    point = _fitted(totals.sum(axis=0, keepdims=True), np.arange(n_models)[None, :], n_models)
    draws = _fitted(cluster_multiplicities(n_clusters, n_resamples, seed) @ totals,
                    np.random.default_rng(derive_seed(seed, "reference-models")).integers(
                        0, n_models, size=(n_resamples, n_models)), n_models)
    interval = percentile_interval(float(point["inflation"][0]), draws["inflation"], confidence)
    valid = draws["inflation"][~np.isnan(draws["inflation"])]
    p_value = float(np.mean(valid <= 0)) if valid.size else float("nan")
    # one image resamples to itself: a zero-width item spread would claim certainty the data cannot give
    low, high = (interval.low, interval.high) if n_clusters > 1 else (float("nan"), float("nan"))
    return ConStat(observed=float(point["observed"][0]), expected=float(point["expected"][0]),
                   inflation=interval.estimate, low=low, high=high, p_value=p_value,
                   intercept=float(point["intercept"][0]), slope=float(point["slope"][0]),
                   n_references=n_models, n_valid=interval.n_valid, n_resamples=n_resamples,
                   unit=IMAGE if n_clusters < n_items else ITEM, n_clusters=n_clusters, n_items=n_items,
                   confidence=confidence)


def _fitted(summed: np.ndarray, chosen: np.ndarray, n_models: int) -> dict[str, np.ndarray]:
    """Per row of summed cluster totals (one bootstrap draw) and its chosen reference models: the
    line through their (reference, benchmark) accuracies and the candidate's observed, expected
    and inflation. NaN where the chosen models share one reference accuracy (no line)."""
    accuracy = summed[:, :-1] / summed[:, -1:]
    rows = np.arange(len(summed))[:, None]
    benchmark = accuracy[:, 2:2 + n_models][rows, chosen]
    reference = accuracy[:, 2 + n_models:][rows, chosen]
    x_mean, y_mean = reference.mean(axis=1), benchmark.mean(axis=1)
    spread = ((reference - x_mean[:, None]) ** 2).sum(axis=1)
    covariance = ((reference - x_mean[:, None]) * (benchmark - y_mean[:, None])).sum(axis=1)
    # a spread of rounding size is no spread: a line through it would be noise
    defined = spread > 1e-12
    slope = np.where(defined, covariance / np.where(defined, spread, 1.0), np.nan)
    expected = y_mean + slope * (accuracy[:, 1] - x_mean)
    return {"observed": accuracy[:, 0], "expected": expected, "inflation": accuracy[:, 0] - expected,
            "slope": slope, "intercept": y_mean - slope * x_mean}
