"""The gap in mean score between flagged and unflagged items whose flag belongs to their image.

An image-overlap flag is a property of an image: every question on a flagged image is flagged
(SLAKE-En: 1,061 questions on 96 images, 19 of them flagged). Questions on one image share what
the model knows about it, so they are not independent; both the interval and the test here treat
the image as the unit:

- the gap ``mean(score | flagged) - mean(score | unflagged)`` over questions, with a percentile
  interval from :func:`medexp.stats.bootstrap.cluster_bootstrap` (whole images resampled, each
  with all its questions);
- its one-sided p-value (flagged items score higher) from permuting the image-level flags among
  the images, ``p = (1 + #{gap* >= gap}) / (1 + P)``: under the null, which images carry the
  flag says nothing about the scores of their questions;
- the same gap minus a reference model's gap on the same items (a contamination-free baseline):
  its interval resamples the same images for both models
  (:func:`medexp.stats.bootstrap.paired_cluster_bootstrap`), its p-value permutes the same flags.

Every draw comes from a generator seeded by the caller (from its cell), so results reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

import numpy as np

from medexp.stats.bootstrap import cluster_bootstrap, paired_cluster_bootstrap
from medexp.stats.inflation import cluster_index


@dataclass(frozen=True)
class ClusterGap:
    gap: float  # mean score of flagged items minus that of unflagged items
    low: float  # percentile interval, images resampled
    high: float
    p_value: float  # one-sided image-permutation p of gap > 0 (+1 convention)
    n_exceed: int
    n_permutations: int
    n_items: int
    n_flagged_items: int
    n_images: int
    n_flagged_images: int
    mean_flagged: float
    mean_unflagged: float
    # the pooled standard deviation of the image means within the flagged and unflagged groups (NaN
    # when a group has one image): the unit of Cohen's d of the image means, in which an MDE is stated
    image_sd: float


def image_flags(flags: np.ndarray, clusters: np.ndarray, labels: Sequence[Hashable] | None = None) -> np.ndarray:
    """Each image's flag (its items must agree: a flag that varies within an image is no image flag)."""
    n_clusters = int(clusters.max()) + 1
    flagged = np.zeros(n_clusters, dtype=np.int64)
    counts = np.bincount(clusters, minlength=n_clusters)
    np.add.at(flagged, clusters, flags.astype(np.int64))
    mixed = np.flatnonzero((flagged > 0) & (flagged < counts))
    if mixed.size:
        name = labels[int(np.flatnonzero(clusters == mixed[0])[0])] if labels is not None else int(mixed[0])
        name = name.item() if isinstance(name, np.generic) else name
        raise ValueError(f"{mixed.size} image(s) have flagged and unflagged questions (first: {name!r}); "
                         "the flag must be the image's, as an image-overlap test gives it")
    return flagged > 0


def _totals(scores: np.ndarray, flags: np.ndarray, clusters: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per image: summed score and count of its flagged items, then of its unflagged items."""
    totals = np.zeros((n_clusters, 4))
    columns = np.column_stack([scores * flags, flags, scores * ~flags, ~flags]).astype(np.float64)
    np.add.at(totals, clusters, columns)
    return totals


def _gap(summed: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"gap": summed[:, 0] / summed[:, 1] - summed[:, 2] / summed[:, 3]}


def _permuted_gaps(image_sums: np.ndarray, image_counts: np.ndarray, image_flag: np.ndarray,
                   n_permutations: int, rng: np.random.Generator) -> np.ndarray:
    """The gap under ``n_permutations`` random reassignments of the image flags (same number flagged)."""
    n_images, n_flagged = image_flag.size, int(image_flag.sum())
    total_sum, total_count = image_sums.sum(axis=-1), image_counts.sum()
    gaps = np.empty((n_permutations,) + image_sums.shape[:-1])
    block = max(1, 2_000_000 // max(n_images, 1))  # permutations per block: bounded memory
    for start in range(0, n_permutations, block):
        stop = min(start + block, n_permutations)
        # a random permutation per row; its first n_flagged images carry the flag
        order = np.argsort(rng.random((stop - start, n_images)), axis=1)
        chosen = np.zeros((stop - start, n_images))
        np.put_along_axis(chosen, order[:, :n_flagged], 1.0, axis=1)
        flagged_sum = chosen @ image_sums.T  # (block, models)
        flagged_count = chosen @ image_counts
        flagged_mean = flagged_sum / flagged_count[:, None]
        rest_mean = (total_sum[None, :] - flagged_sum) / (total_count - flagged_count)[:, None]
        gaps[start:stop] = (flagged_mean - rest_mean).reshape((stop - start,) + image_sums.shape[:-1])
    return gaps


def _check(scores: np.ndarray, flags: np.ndarray, images) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim not in (1, 2):
        raise ValueError(f"scores must be one vector per model, got shape {scores.shape}")
    flags = np.asarray(flags, dtype=bool)
    n = scores.shape[-1]
    if flags.shape != (n,):
        raise ValueError(f"one flag per item: {flags.shape} flags for {n} items")
    bad = int(np.sum(~np.isfinite(scores)))
    if bad:
        raise ValueError(f"{bad} score(s) are NaN or infinite")
    clusters = cluster_index(images, n)
    image_flag = image_flags(flags, clusters, images)
    if image_flag.all() or not image_flag.any():
        raise ValueError(f"the gap needs flagged and unflagged images: {int(image_flag.sum())} of {image_flag.size} "
                         "images are flagged")
    return scores, flags, clusters


def cluster_gap(scores, flags, images: Optional[Sequence[Optional[Hashable]]], n_permutations: int = 10_000,
                n_resamples: int = 2_000, seed: int = 0, confidence: float = 0.95) -> ClusterGap:
    """The flagged-minus-unflagged gap of ``scores`` (one per item) with its image-resampling interval
    and image-permutation p-value; ``images`` names each item's image (None: an image of its own)."""
    scores, flags, clusters = _check(scores, flags, images)
    if scores.ndim != 1:
        raise ValueError("cluster_gap reads one model's scores; gap_difference compares two")
    n_images = int(clusters.max()) + 1
    totals = _totals(scores, flags, clusters, n_images)
    seeds = np.random.SeedSequence(seed).spawn(2)
    interval = cluster_bootstrap(totals, _gap, n_resamples, int(seeds[0].generate_state(1)[0]), confidence)["gap"]
    image_flag = totals[:, 1] > 0
    sums = (totals[:, 0] + totals[:, 2])[None, :]
    null = _permuted_gaps(sums, totals[:, 1] + totals[:, 3], image_flag, n_permutations,
                          np.random.default_rng(seeds[1]))[:, 0]
    exceed = int(np.sum(null >= interval.estimate - 1e-12 * max(1.0, abs(interval.estimate))))
    flagged_total = totals.sum(axis=0)
    return ClusterGap(interval.estimate, interval.low, interval.high, (1 + exceed) / (1 + n_permutations), exceed,
                      n_permutations, int(scores.size), int(flags.sum()), n_images, int(image_flag.sum()),
                      float(flagged_total[0] / flagged_total[1]), float(flagged_total[2] / flagged_total[3]),
                      _pooled_sd(sums[0] / (totals[:, 1] + totals[:, 3]), image_flag))


def _pooled_sd(image_means: np.ndarray, image_flag: np.ndarray) -> float:
    groups = [image_means[image_flag], image_means[~image_flag]]
    if min(group.size for group in groups) < 2:
        return float("nan")
    squares = sum(float(((group - group.mean()) ** 2).sum()) for group in groups)
    return float(np.sqrt(squares / (image_means.size - 2)))


@dataclass(frozen=True)
class GapDifference:
    difference: float  # the target's gap minus the reference's
    low: float
    high: float
    p_value: float  # one-sided image-permutation p of difference > 0
    gap_target: float
    gap_reference: float
    n_permutations: int


def gap_difference(target, reference, flags, images: Optional[Sequence[Optional[Hashable]]],
                   n_permutations: int = 10_000, n_resamples: int = 2_000, seed: int = 0,
                   confidence: float = 0.95) -> GapDifference:
    """The target's gap minus the reference model's gap on the same items and flags: the part of the
    target's advantage on flagged images that a model which never saw them does not share."""
    scores, flags, clusters = _check(np.vstack([target, reference]), flags, images)
    n_images = int(clusters.max()) + 1
    totals_t = _totals(scores[0], flags, clusters, n_images)
    totals_r = _totals(scores[1], flags, clusters, n_images)
    seeds = np.random.SeedSequence(seed).spawn(2)
    paired = paired_cluster_bootstrap(totals_t, totals_r, _gap, n_resamples, int(seeds[0].generate_state(1)[0]),
                                      confidence)["gap"]
    image_flag = totals_t[:, 1] > 0
    sums = np.vstack([totals_t[:, 0] + totals_t[:, 2], totals_r[:, 0] + totals_r[:, 2]])
    null = _permuted_gaps(sums, totals_t[:, 1] + totals_t[:, 3], image_flag, n_permutations,
                          np.random.default_rng(seeds[1]))
    null_difference = null[:, 0] - null[:, 1]
    observed = paired.estimate
    exceed = int(np.sum(null_difference >= observed - 1e-12 * max(1.0, abs(observed))))
    return GapDifference(observed, paired.low, paired.high, (1 + exceed) / (1 + n_permutations), paired.estimate_a,
                         paired.estimate_b, n_permutations)
