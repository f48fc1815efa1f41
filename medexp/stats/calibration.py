"""The calibration model of the cohort-median confound (controlled audit, section 4.10).

Per example i and model m the Min-K%++ score is

    s_im = g_m e_i + b_m + eps_im + delta_im                                  (Eq. 1)

with a model-independent easiness e_i >= 0, a calibration gain g_m > 0, an offset b_m, noise
eps_im ~ N(0, noise_sd^2) and a contamination term delta_im >= 0 that is non-zero only on the
examples model m memorised. Appendix B draws e_i from two strata shaped like SLAKE-En: OPEN
items with e = |N(0, 1)| and CLOSED items with a heavy tail, e ~ Exponential(mean 900).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Easiness:
    """Easiness e_i of one synthetic benchmark, in position order, and which items are CLOSED."""

    values: np.ndarray
    closed: np.ndarray  # bool per example


def closed_count(n_examples: int, open_fraction: float) -> int:
    """How many of ``n_examples`` are CLOSED: round((1 - open_fraction) n), ties to even."""
    return round((1.0 - open_fraction) * n_examples)


def check_easiness_parameters(n_examples: int, open_fraction: float, closed_mean: float) -> None:
    """Reject parameters that cannot describe a benchmark, naming the bad value."""
    if n_examples < 1:
        raise ValueError(f"synthetic benchmark: n_examples must be at least 1, got {n_examples}")
    if not 0.0 <= open_fraction <= 1.0:
        raise ValueError(f"synthetic benchmark: open_fraction must be in [0, 1], got {open_fraction}")
    if not (closed_mean > 0 and math.isfinite(closed_mean)):
        raise ValueError(f"synthetic benchmark: closed_mean must be a positive number, got {closed_mean}")


def draw_easiness(n_examples: int, open_fraction: float, closed_mean: float, rng: np.random.Generator) -> Easiness:
    """Exactly round((1 - open_fraction) n) CLOSED items, at positions drawn by ``rng``, with
    e ~ Exponential(mean ``closed_mean``); the rest OPEN with e = |N(0, 1)|."""
    check_easiness_parameters(n_examples, open_fraction, closed_mean)
    closed = np.zeros(n_examples, dtype=bool)
    closed[rng.choice(n_examples, size=closed_count(n_examples, open_fraction), replace=False)] = True
    values = np.empty(n_examples, dtype=np.float64)
    values[closed] = rng.exponential(closed_mean, size=int(closed.sum()))
    values[~closed] = np.abs(rng.standard_normal(int((~closed).sum())))
    return Easiness(values, closed)


def calibration_scores(
    easiness: np.ndarray,
    gain: float,
    offset: float,
    noise_sd: float,
    rng: np.random.Generator,
    contaminated_fraction: float = 0.0,
    contamination_size: float = 0.0,
) -> np.ndarray:
    """One model's scores s_i = gain e_i + offset + eps_i + delta_i (Eq. 1).

    The noise is drawn before the contaminated examples (exactly round(fraction n) of them,
    each with delta = ``contamination_size``), so planting contamination leaves a model's
    noise unchanged.
    """
    values = np.asarray(easiness, dtype=np.float64)
    check_model_parameters(gain, noise_sd, contaminated_fraction, contamination_size)
    noise = rng.normal(0.0, noise_sd, size=values.size)
    delta = np.zeros(values.size)
    contaminated = rng.choice(values.size, size=round(contaminated_fraction * values.size), replace=False)
    delta[contaminated] = contamination_size
    return gain * values + offset + noise + delta


def check_model_parameters(
    gain: float, noise_sd: float, contaminated_fraction: float, contamination_size: float
) -> None:
    """Reject values outside the calibration model's definition (g > 0, sd >= 0, delta >= 0)."""
    if not (gain > 0 and math.isfinite(gain)):
        raise ValueError(f"calibration model: gain must be a positive number, got {gain}")
    if not (noise_sd >= 0 and math.isfinite(noise_sd)):
        raise ValueError(f"calibration model: noise_sd must be >= 0, got {noise_sd}")
    if not 0.0 <= contaminated_fraction <= 1.0:
        raise ValueError(f"calibration model: contaminated_fraction must be in [0, 1], got {contaminated_fraction}")
    if not (contamination_size >= 0 and math.isfinite(contamination_size)):
        raise ValueError(f"calibration model: contamination_size (delta) must be >= 0, got {contamination_size}")
