"""Detector 1, image near-neighbour overlap: statistics over nearest-neighbour distances.

Units. An *image* is one distinct content (the SHA-256 of its bytes): a VQA split holds each
image once per question, and questions about one image are not independent draws. The input is
one row per distinct benchmark image: the cosine distance to its nearest image in the
deduplicated corpus and how many of the benchmark's questions use it (``n_questions``). The test
counts images; the question-level count and rate are reported beside it.

Exact duplicates. A benchmark image whose bytes, or whose stored embedding, equal those of a
corpus image is an exact duplicate. The pipeline gives it distance exactly 0 (distances are
recomputed in float64, where identical vectors give 0 and different ones a positive number), so
here ``distance == 0`` marks an exact duplicate. It is always flagged, whatever tau.

Threshold. ``tau = Q_alpha``, the k-th smallest of m calibration distances with
``k = ceil(alpha m)``; an image is flagged when its distance is strictly below tau (or 0). The
calibration distances are those of a seeded sample of *distinct* corpus images to their nearest
other distinct corpus image: identical corpus images (same bytes or same vector) are collapsed
into one before calibration. Without that, a corpus with internal copies (a VQA train split,
re-published figures) gives most sampled images a neighbour at distance 0, tau collapses to 0 and
nothing, not even an exact copy, is "closer than tau". A tau below the embedder's resolution
(the float16 tie distance, or one bit of a hash) is *degenerate*: the corpus still holds
near-identical copies that deduplication did not collapse, and tau separates nothing but exact
copies. It is reported (metric ``tau_degenerate``, a warning), never hidden behind p = 1.

P-value. Null hypothesis: a benchmark image is no closer to the corpus than distinct corpus
images are to each other, i.e. benchmark and calibration distances are exchangeable draws. Then
the number X of flagged images among n is exactly beta-binomial, X ~ BetaBinom(n, k, m - k + 1):
given tau, X is Binomial(n, F(tau)), and F(tau) of the k-th of m order statistics is
Beta(k, m - k + 1). The one-sided p-value is P(X >= x_observed): the binomial test of the flag
count against alpha with the sampling error of tau folded in (it tends to Binomial(n, alpha) as
m grows); ignoring that error would inflate false positives when n is not small next to m.
Exact copies enter X as ordinary flags. Under the null a benchmark image is a fresh draw and
equals a corpus image with probability 0, as no calibration distance is 0 (the deduplicated
corpus has no identical pair); their distance 0 lies below any positive tau, so counting them is
counting ``distance < tau``, the event the null describes. A benchmark of copies therefore gets
a tiny p-value, not p = 1. Ties (e.g. the discrete distances of a perceptual hash) only make the
strict ``< tau`` test more conservative. The calibration distances are close to independent when
the sample is small next to the corpus (5,000 of 1.85M in the audit). When it is the whole
corpus, mutual nearest neighbours share a distance and the test is slightly liberal (a synthetic
check gave a 6.7% false-positive rate at nominal 5% with m = N = 600, and 4% with m = 600 of
N = 1,800).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from medexp.config.schemas import ControlKind, ImageNNConfig
from medexp.detectors.base import DetectorResult
from medexp.detectors.declaration import DetectorDeclaration, Input, Simulated

NEIGHBOUR_COLUMNS = ("example_id", "position", "neighbour_id", "distance")


def null_rank(alpha: float, m: int) -> int:
    """k = ceil(alpha m), at least 1: the rank of tau among the m calibration distances."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if m < 1:
        raise ValueError("threshold calibration needs at least one corpus distance")
    return max(1, math.ceil(alpha * m - 1e-9))  # the epsilon absorbs float error in alpha * m


def null_threshold(calibration: np.ndarray, alpha: float) -> float:
    """tau = Q_alpha: the ceil(alpha m)-th smallest calibration distance."""
    calibration = _finite(calibration, "calibration distances")
    k = null_rank(alpha, len(calibration))
    return float(np.partition(calibration, k - 1)[k - 1])


def flag_count_p_value(n_flagged: int, n: int, m: int, k: int) -> float:
    """P(X >= n_flagged) for X ~ BetaBinom(n, k, m - k + 1) (see the module docstring)."""
    from scipy.special import logsumexp
    from scipy.stats import betabinom

    if n_flagged <= 0:
        return 1.0
    # summing the tail's pmf keeps tiny p-values accurate (1 - cdf cancels to noise near 1e-13)
    tail = betabinom.logpmf(np.arange(n_flagged, n + 1), n, k, m - k + 1)
    return float(min(1.0, np.exp(logsumexp(tail))))


def flagged_at(distances: np.ndarray, tau: float) -> np.ndarray:
    """Images closer than tau, and exact duplicates (distance 0) whatever tau."""
    return (distances < tau) | (distances == 0.0)


def alpha_sweep(distances: np.ndarray, calibration: np.ndarray, alphas: Sequence[float]) -> pd.DataFrame:
    """Threshold, flagged images, their share and the p-value of each alpha (one row per alpha)."""
    m, n = len(calibration), len(distances)
    rows = []
    for alpha in sorted(alphas):
        k = null_rank(alpha, m)
        tau = null_threshold(calibration, alpha)
        flagged = int(np.count_nonzero(flagged_at(distances, tau)))
        rows.append(
            {
                "alpha": float(alpha),
                "k": k,
                "tau": tau,
                "expected_flag_rate": k / (m + 1),
                "n_flagged": flagged,
                "flag_rate": flagged / n,
                "p_value": flag_count_p_value(flagged, n, m, k),
            }
        )
    return pd.DataFrame(rows)


def image_nn_detector(
    images: pd.DataFrame,
    calibration: np.ndarray,
    tau_alpha: float,
    sweep_alphas: Sequence[float],
    test_alpha: float,
    resolution: float = 0.0,
) -> DetectorResult:
    """Flag benchmark images closer than tau to the corpus, or identical to a corpus image; test
    the flagged-image count (module docstring).

    ``images`` has one row per distinct benchmark image (columns ``NEIGHBOUR_COLUMNS``; optional
    ``n_questions``, the questions using the image, 1 when absent; extra columns are kept);
    ``calibration`` holds the deduplicated, self-excluded corpus distances. ``test_alpha`` is
    the level at which the cell is flagged (p < test_alpha); a tau below ``resolution`` (the
    embedder's tie distance) is reported as degenerate.
    """
    missing = [column for column in NEIGHBOUR_COLUMNS if column not in images]
    if missing:
        raise ValueError(f"neighbour table lacks column(s) {missing}")
    if images.empty:
        raise ValueError("image_nn: no benchmark images to test")
    distances = _finite(images["distance"].to_numpy(dtype=np.float64), "benchmark distances")
    if (distances < 0).any():
        raise ValueError(f"image_nn: {int((distances < 0).sum())} negative benchmark distances")
    calibration = _finite(calibration, "calibration distances")
    questions = images["n_questions"].to_numpy(dtype=np.int64) if "n_questions" in images else np.ones(len(images), np.int64)
    n, m = len(distances), len(calibration)
    k = null_rank(tau_alpha, m)
    tau = null_threshold(calibration, tau_alpha)
    exact = distances == 0.0
    table = images.assign(exact_duplicate=exact, flagged=flagged_at(distances, tau))
    flagged = table["flagged"].to_numpy()
    n_flagged = int(flagged.sum())
    p_value = flag_count_p_value(n_flagged, n, m, k)
    sweep = alpha_sweep(distances, calibration, sorted(set(sweep_alphas) | {tau_alpha}))
    flagged_pairs = (
        table[flagged]
        .sort_values(["exact_duplicate", "distance", "position"], ascending=[False, True, True], kind="stable")
        .reset_index(drop=True)
    )
    degenerate = tau <= 0.0 or tau < resolution
    metrics = {
        "p_value": p_value,
        "statistic": n_flagged / n,
        "n_examples": float(n),  # the test's unit: distinct images
        "flag": float(p_value < test_alpha),
        "n_images": float(n),
        "n_questions": float(questions.sum()),
        "n_images_flagged": float(n_flagged),
        "n_questions_flagged": float(questions[flagged].sum()),
        "image_flag_rate": n_flagged / n,
        "question_flag_rate": float(questions[flagged].sum() / questions.sum()),
        "n_exact_duplicates_images": float(exact.sum()),
        "n_exact_duplicates_questions": float(questions[exact].sum()),
        "tau": tau,
        "tau_alpha": float(tau_alpha),
        "tau_degenerate": float(degenerate),
        "embedder_resolution": float(resolution),
        "expected_flag_rate": k / (m + 1),
        "calibration_size": float(m),
        "min_distance": float(distances.min()),
        "median_distance": float(np.median(distances)),
        "calibration_median_distance": float(np.median(calibration)),
    }
    warnings = []
    if degenerate:
        warnings.append(
            f"image_nn: tau = {tau:.3g} is degenerate (below the embedder's resolution {resolution:.3g}): {k} or more of "
            f"the {m} sampled distinct corpus images have a copy in the corpus closer than the embedder can resolve, "
            "which deduplication did not collapse; only exact duplicates can be flagged"
        )
    figures = {"alpha_sweep": sweep_figure(sweep, tau_alpha), "nn_distances": distance_figure(distances, calibration, tau)}
    return DetectorResult(
        metrics, table, "nearest_neighbours", figures, extra_tables={"alpha_sweep": sweep, "flagged_pairs": flagged_pairs},
        warnings=warnings,
    )


def sweep_figure(sweep: pd.DataFrame, tau_alpha: float):
    """Flag rate against alpha (log-log), with the rate expected under the null."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0, 3.6), layout="constrained")
    axes = figure.add_subplot()
    axes.plot(sweep["alpha"], sweep["flag_rate"], "o-", label="benchmark flag rate")
    axes.plot(sweep["alpha"], sweep["expected_flag_rate"], "--", color="grey", label="expected under the null")
    axes.axvline(tau_alpha, linestyle=":", color="black", label=f"alpha = {tau_alpha:g}")
    axes.set_xlim(sweep["alpha"].min() / 1.5, sweep["alpha"].max() * 1.5)  # also for a single alpha
    axes.set_xscale("log")
    axes.set_yscale("symlog", linthresh=1e-3)  # zero rates stay visible
    axes.set_ylim(bottom=0.0, top=max(1e-2, float(sweep[["flag_rate", "expected_flag_rate"]].max().max())) * 1.5)
    axes.set_xlabel("alpha (tau = alpha-quantile of corpus NN distances)")
    axes.set_ylabel("share of benchmark images flagged")
    axes.legend(fontsize=8)
    return figure


def distance_figure(distances: np.ndarray, calibration: np.ndarray, tau: float):
    """Histograms of benchmark and calibration NN distances, with tau marked."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.0, 3.6), layout="constrained")
    axes = figure.add_subplot()
    bins = np.linspace(0.0, max(float(distances.max()), float(calibration.max()), tau) * 1.02 + 1e-9, 60)
    axes.hist(calibration, bins=bins, density=True, alpha=0.5, label="corpus to corpus (distinct images)")
    axes.hist(distances, bins=bins, density=True, alpha=0.5, label="benchmark to corpus")
    axes.axvline(tau, color="black", linestyle=":", label=f"tau = {tau:.4g}")
    axes.set_xlabel("cosine distance to the nearest corpus image")
    axes.set_ylabel("density")
    axes.legend(fontsize=8)
    return figure


def _finite(values, what: str) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        raise ValueError(f"image_nn: no {what}")
    if not np.isfinite(values).all():
        raise ValueError(f"image_nn: {int((~np.isfinite(values)).sum())} non-finite {what}")
    return values


_SCORE_ORDER = "the order comes from the cell model's scores, but image_nn uses no model and does not depend on order"

DECLARATION = DetectorDeclaration(
    name="image_nn",
    schema=ImageNNConfig,
    evaluator="medexp.evaluators.images:image_nn",
    inputs=frozenset({Input.images, Input.corpus}),
    controls=frozenset({ControlKind.none, ControlKind.order_hash, ControlKind.negative_images}),
    power=Simulated("a beta-binomial test of the flag count against a calibrated rate"),
    power_count="medexp.evaluators.images:image_sizes",
    docs="docs/images.md",
    control_reasons={
        ControlKind.blind_image: "image_nn compares images only; without images there is nothing to test",
        ControlKind.external_baseline: "image_nn involves no model, so there is nothing to run on a baseline model",
        ControlKind.order_answer_len: _SCORE_ORDER,
        ControlKind.order_mink: _SCORE_ORDER,
    },
    report_tables={"alpha_sweep": ("detector.sweep_alphas", "alpha_sweep.parquet")},
)
