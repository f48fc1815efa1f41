"""The inflation of a paired answering design in accuracy points, with a clustered bootstrap interval.

An answering detector asks every item twice (original and shuffled options, original and perturbed
twin, with and without the image ...) or compares one arm with a per-item reference (text-only
accuracy against each item's chance rate). Item i gives ``first[i]`` (the original arm's outcome,
0/1) and ``second[i]`` (the other arm's outcome, a mean over its variants, or a chance rate); the
inflation is ``sum(first - second) / n``: how many accuracy points (as a fraction) the released
form of the items buys.

Its interval is a percentile bootstrap that resamples *images*, each with all of its items: items
that share an image (VQA-RAD's and SLAKE's several questions per image) share whatever the model
knows about that image, so they are not independent and an item bootstrap would be too narrow.
Items without an image are their own cluster; a single cluster has no interval (NaN). When no two
items share an image the resampling unit is the item, and the result says so (``unit``). The
draws are :func:`medexp.stats.bootstrap.cluster_bootstrap`'s, so one seed (the caller derives it
from its cell) reproduces the interval exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Hashable, Optional

import numpy as np

from medexp.stats.bootstrap import N_RESAMPLES, cluster_bootstrap

IMAGE, ITEM = "image", "item"


@dataclass(frozen=True)
class Inflation:
    estimate: float  # mean of first - second over the items (a fraction: 0.05 = 5 accuracy points)
    low: float
    high: float
    unit: str  # the resampling unit: "image" (items sharing an image travel together) or "item"
    n_clusters: int  # units resampled
    n_items: int
    n_resamples: int
    confidence: float

    def metrics(self) -> dict[str, float]:
        """``inflation``, ``inflation_ci_low``, ``inflation_ci_high`` and ``inflation_n_clusters``."""
        return {"inflation": self.estimate, "inflation_ci_low": self.low, "inflation_ci_high": self.high,
                "inflation_n_clusters": float(self.n_clusters)}

    @property
    def resampling(self) -> str:
        """The resampling unit in words, e.g. "image (312 clusters of 451 items)"."""
        if self.unit == IMAGE:
            return f"image ({self.n_clusters} clusters of {self.n_items} items)"
        return f"item ({self.n_items} items)"


def paired_inflation(first: Sequence[float], second: Sequence[float],
                     images: Optional[Sequence[Optional[Hashable]]] = None, n_resamples: int = N_RESAMPLES,
                     seed: int = 0, confidence: float = 0.95) -> Inflation:
    """The inflation ``mean(first - second)`` with its percentile interval, resampling the items'
    ``images`` (None for an item without one: its own cluster; ``images`` None: every item its own)."""
    first = np.asarray(first, dtype=np.float64)
    second = np.asarray(second, dtype=np.float64)
    if first.ndim != 1 or first.shape != second.shape or first.size == 0:
        raise ValueError(f"first and second must be equally long non-empty vectors, "
                         f"got {first.shape} and {second.shape}")
    clusters = cluster_index(images, first.size)
    n_clusters = int(clusters.max()) + 1
    totals = np.zeros((n_clusters, 2))
    np.add.at(totals, clusters, np.column_stack([first - second, np.ones_like(first)]))

    def mean_difference(summed: np.ndarray) -> dict[str, np.ndarray]:
        return {"inflation": summed[:, 0] / summed[:, 1]}

    interval = cluster_bootstrap(totals, mean_difference, n_resamples, seed, confidence)["inflation"]
    # one image resamples to itself: a zero-width interval would claim certainty the data cannot give
    low, high = (interval.low, interval.high) if n_clusters > 1 else (float("nan"), float("nan"))
    unit = IMAGE if n_clusters < first.size else ITEM
    return Inflation(interval.estimate, low, high, unit, n_clusters, int(first.size), n_resamples, confidence)


def cluster_index(images, n: int) -> np.ndarray:
    """Each item's cluster number; items without an image get clusters of their own."""
    if images is None:
        return np.arange(n)
    if len(images) != n:
        raise ValueError(f"images must name one image (or None) per item: {len(images)} for {n} items")
    numbers: dict[Hashable, int] = {}
    index = []
    for image in images:
        key = (object(),) if image is None or image != image else ("image", image)  # None and NaN: no image
        index.append(numbers.setdefault(key, len(numbers)))
    return np.asarray(index, dtype=np.int64)
