"""Ordering controls (the ordering ablation, controlled audit section 4.7).

An order-sensitive detector (exch, exch_rank) asks whether the order under test is special for
the model. The ablation re-runs it under orders that no training run could have seen:

* ``order_hash``: SHA-1 of example_id, derived from content alone;
* ``order_answer_len``: the answer's token count under the cell's model, shortest first. Short
  answers have a high total log-likelihood for any model, so this order carries a known
  likelihood covariate (a positive-confound check);
* ``order_mink``: the cell's model's per-example Min-K%++ score, lowest first (a model-derived,
  adversarial order).

Ties in a score order are broken by SHA-1 of example_id, never by release position: a tie
broken by position would carry part of the release order into the ablation.
"""

from __future__ import annotations

import hashlib
import math
from typing import Mapping, Sequence

import numpy as np

from medexp.benchmarks.base import Example


def hash_key(example_id: str) -> str:
    """SHA-1 hex digest of an example id: the content-derived sort key of ``order_hash``."""
    return hashlib.sha1(example_id.encode("utf-8")).hexdigest()


def order_by_hash(examples: Sequence[Example]) -> list[Example]:
    """Examples sorted by SHA-1 of their example_id."""
    return sorted(examples, key=lambda ex: hash_key(ex.example_id))


def order_by_values(examples: Sequence[Example], values: Mapping[str, float], what: str) -> list[Example]:
    """Examples sorted by ``values[example_id]`` ascending, ties by SHA-1 of example_id.

    ``what`` names the value in errors (a missing or NaN value would make the order undefined).
    """
    missing = [ex.example_id for ex in examples if ex.example_id not in values]
    if missing:
        raise ValueError(f"no {what} for {len(missing)} examples (first: {missing[0]}); cannot order by it")
    bad = [ex.example_id for ex in examples if not math.isfinite(values[ex.example_id])]
    if bad:
        raise ValueError(f"{what} is NaN or infinite for {len(bad)} examples (first: {bad[0]}); cannot order by it")
    return sorted(examples, key=lambda ex: (values[ex.example_id], hash_key(ex.example_id)))


def answer_lengths(score_table) -> dict[str, float]:
    """Answer token count per example_id, from a per-example score table."""
    return dict(zip(score_table["example_id"], score_table["n_answer_tokens"].astype(float)))


def mink_scores(score_table, k_percent: float) -> dict[str, float]:
    """Min-K%++ score per example_id (mean of the lowest K% of ``token_minkpp_z``)."""
    from medexp.detectors.cohort import min_k_scores

    return dict(zip(score_table["example_id"], min_k_scores(score_table["token_minkpp_z"], k_percent)))


def order_spearman(examples: Sequence[Example]) -> float:
    """Spearman correlation between released position and place in ``examples``.

    1.0 when the released order is kept, about 0 for an order unrelated to it, -1.0 reversed:
    how much of the release order an ablation keeps. Positions are distinct, so the rank form
    1 - 6 sum d^2 / (n (n^2 - 1)) is exact (integer sums; 1.0 exactly for the released order).
    Fewer than two examples: 1.0 (there is one order).
    """
    n = len(examples)
    if n < 2:
        return 1.0
    positions = np.array([ex.position for ex in examples])
    if np.unique(positions).size != n:
        raise ValueError("examples repeat a released position; cannot compare orders")
    rank_of_position = np.argsort(np.argsort(positions, kind="stable"), kind="stable")
    d = rank_of_position - np.arange(n)
    return 1.0 - 6.0 * float(np.dot(d, d)) / (n * (n * n - 1.0))
