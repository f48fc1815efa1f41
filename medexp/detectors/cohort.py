"""Cohort score tables: a target model's per-example scores next to its reference models'.

The cohort detectors (mink_tail, topk_jaccard, loss) compare models example by example, so
their input is one score table per model over the same examples, aligned here into
(examples x models) matrices with the target in column 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from medexp.stats.cohort import CohortRelabelResult


@dataclass
class CohortScores:
    """Score tables (one per model, as made by ``medexp.scoring.example_scores``) of one cell.

    ``tables`` maps model name to score table; ``target`` names the audited model, and every
    other entry is a reference model. Rows are aligned on ``example_id``, in the target's order.
    """

    target: str
    tables: dict[str, pd.DataFrame]

    def __post_init__(self) -> None:
        if self.target not in self.tables:
            raise ValueError(f"the target model {self.target!r} has no score table (have {list(self.tables)})")
        expected = self.example_ids
        if len(set(expected)) != len(expected):
            raise ValueError(f"the score table of {self.target!r} repeats example ids")
        for name, table in self.tables.items():
            ids = table["example_id"]
            if len(ids) != len(expected) or set(ids) != set(expected):
                missing = len(set(expected) - set(ids))
                extra = len(set(ids) - set(expected))
                raise ValueError(
                    f"model {name!r} was scored on other examples than the target {self.target!r} "
                    f"({missing} missing, {extra} extra); cohort models must score the same benchmark"
                )

    @property
    def models(self) -> list[str]:
        """Model names, the target first, then the references in the order given."""
        return [self.target] + [name for name in self.tables if name != self.target]

    @property
    def example_ids(self) -> list[str]:
        return self.tables[self.target]["example_id"].tolist()

    @property
    def n_examples(self) -> int:
        return len(self.tables[self.target])

    def require_references(self, minimum: int, detector: str) -> None:
        references = len(self.models) - 1
        if references < minimum:
            raise ValueError(
                f"{detector} needs at least {minimum} reference models besides the target {self.target!r}, "
                f"got {references} ({self.models[1:]}); list more model configs in detector.cohort"
            )

    def matrix(self, per_example: Callable[[pd.DataFrame], np.ndarray], what: str) -> np.ndarray:
        """(examples x models) matrix of ``per_example(table)``, the target in column 0."""
        columns = []
        for name in self.models:
            table = self.tables[name].set_index("example_id").loc[self.example_ids].reset_index()
            values = np.asarray(per_example(table), dtype=np.float64)
            bad = int(np.sum(~np.isfinite(values)))
            if bad:
                raise ValueError(f"{bad} of {values.size} {what} values of model {name!r} are NaN or infinite")
            columns.append(values)
        return np.column_stack(columns)


def relabel_metrics(test: CohortRelabelResult, matrix_shape: tuple[int, int]) -> dict[str, float]:
    """Metrics of a cohort-relabel test beyond its p-value and statistic: the null's mean and
    spread, the exceedance count (for refining), and the (examples x models) size it ran on."""
    n_examples, n_models = matrix_shape
    return {
        "null_mean": test.null_mean,
        "null_std": test.null_std,
        "n_exceed": float(test.n_exceed),
        "n_permutations": float(test.n_permutations),
        "n_models": float(n_models),
        "n_examples": float(n_examples),
    }


def min_k_count(n_tokens: int, k_percent: float) -> int:
    """How many of an answer's tokens form its lowest K%: floor(K% of them), at least one."""
    return max(1, math.floor(n_tokens * k_percent / 100 + 1e-9))


def min_k_scores(token_values: Sequence[Sequence[float]], k_percent: float) -> np.ndarray:
    """Per example, the mean of the lowest K% of its token values (Min-K% / Min-K%++ score).

    With Min-K%++ z values (Zhang et al., 2025) a high score means even the hardest answer
    tokens are unusually likely for the model: the membership-inference signature.
    """
    if not 0 < k_percent <= 100:
        raise ValueError(f"k_percent must be in (0, 100], got {k_percent}")
    scores = np.empty(len(token_values), dtype=np.float64)
    for index, values in enumerate(token_values):
        ordered = np.sort(np.asarray(values, dtype=np.float64))
        if ordered.size == 0:
            raise ValueError(f"example at row {index} has no answer tokens; cannot take its lowest {k_percent}%")
        scores[index] = ordered[: min_k_count(ordered.size, k_percent)].mean()
    return scores


def meta_columns(meta: pd.DataFrame | None, fields: Sequence[str], log) -> list[str]:
    """The requested meta fields the benchmark has; missing ones are logged, not fatal,
    because benchmarks annotate different fields (PathVQA has no content_type)."""
    present = [] if meta is None else [name for name in fields if name in meta.columns]
    missing = [name for name in fields if name not in present]
    if missing:
        available = [] if meta is None else sorted(set(meta.columns) - {"example_id", "position", "question", "answer"})
        log.warning("meta fields %s are not in this benchmark (available: %s); no strata for them", missing, available)
    return present


TARGET_COLOR = "tab:red"
_REFERENCE_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
                     "tab:olive", "tab:cyan")


def model_colors(n_models: int) -> list[str]:
    """Plot colours of a cohort: the target (column 0) in red, references never in red."""
    return [TARGET_COLOR] + [_REFERENCE_COLORS[i % len(_REFERENCE_COLORS)] for i in range(n_models - 1)]
