"""Small score tables for the cohort detectors, built from per-example values by hand."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from medexp.detectors import CohortScores


def score_table(token_z, mean_logprob=None) -> pd.DataFrame:
    """A score table with the columns the cohort detectors read (one row per example)."""
    n = len(token_z)
    mean_logprob = np.full(n, -1.0) if mean_logprob is None else np.asarray(mean_logprob, dtype=float)
    return pd.DataFrame({
        "example_id": [f"ex::{i:04d}" for i in range(n)],
        "position": np.arange(n),
        "n_answer_tokens": [len(z) for z in token_z],
        "token_minkpp_z": [list(map(float, z)) for z in token_z],
        "mean_logprob": mean_logprob,
    })


def cohort_of_scores(minkpp=None, mean_logprob=None) -> CohortScores:
    """Column j of an (examples x models) matrix becomes model ``m{j}``; ``m0`` is the target.

    ``minkpp`` values become one-token answers, so each example's Min-K%++ score is the value.
    """
    matrix = np.asarray(minkpp if minkpp is not None else mean_logprob, dtype=float)
    tables = {}
    for column in range(matrix.shape[1]):
        token_z = [[v] for v in matrix[:, column]] if minkpp is not None else [[0.0]] * matrix.shape[0]
        logprob = None if mean_logprob is None else np.asarray(mean_logprob, dtype=float)[:, column]
        tables[f"m{column}"] = score_table(token_z, logprob)
    return CohortScores("m0", tables)


def meta_frame(n: int, **fields) -> pd.DataFrame:
    return pd.DataFrame({"example_id": [f"ex::{i:04d}" for i in range(n)], **fields})


def config(**values) -> SimpleNamespace:
    return SimpleNamespace(**values)


def false_positive_band(alpha: float, trials: int) -> tuple[float, float]:
    """A 4-sigma binomial band around alpha for a false-positive rate over ``trials`` runs."""
    half = 4 * np.sqrt(alpha * (1 - alpha) / trials)
    return max(0.0, alpha - half), alpha + half
