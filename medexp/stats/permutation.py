"""Permutation and shard tests behind the exchangeability detectors.

Both are pure functions of arrays: every random draw comes from the ``seed`` argument, which
the runner derives from the cell key, so each p-value reproduces exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

# The permutation draws of rank_exchangeability: under another engine a seed gives other
# permutations, so other p-values. Every cell's fingerprint carries it (medexp.runner.cell_run):
# a cell tracked under another engine is computed again, not reused. Bump it when the draws change.
PERMUTATION_ENGINE = "fisher-yates-lemire-1"


@dataclass(frozen=True)
class RankExchangeabilityResult:
    """Outcome of :func:`rank_exchangeability`.

    ``statistic`` is Spearman's correlation between earliness (``n - 1 - position``) and
    log-likelihood: positive when earlier examples are more likely, as a model that saw the
    benchmark in this order would make them. ``n_exceed`` counts permutations whose statistic
    is at least the observed one, so draws can be pooled when a cell is refined.
    """

    statistic: float
    p_value: float
    n_permutations: int
    n_exceed: int
    null_mean: float
    null_std: float


def rank_exchangeability(
    loglik, n_permutations: int = 10_000, seed: int = 0
) -> RankExchangeabilityResult:
    """One-sided permutation test that earlier examples have higher log-likelihood.

    ``loglik[i]`` is the score of the example at position ``i`` of the order under test.
    p = (1 + #{T(pi) >= T(pi_0)}) / (1 + P), so the smallest reportable p is 1 / (P + 1).
    """
    values = np.asarray(loglik, dtype=np.float64)
    if values.ndim != 1 or values.size < 3:
        raise ValueError(f"rank_exchangeability needs a 1-d array of >= 3 scores, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"rank_exchangeability: {int(np.sum(~np.isfinite(values)))} non-finite scores")
    if n_permutations < 1:
        raise ValueError("n_permutations must be >= 1")
    from medexp.stats.fisher_yates import permuted_dots  # here: importing numba takes about 0.4 s

    n = values.size
    # Doubled average ranks are integers, so every sum below is exact in 64-bit integers and ties
    # between a permutation and the observed order are counted exactly.
    doubled_ranks = np.rint(2.0 * sps.rankdata(values)).astype(np.int64)
    earliness = np.arange(n - 1, -1, -1, dtype=np.int64)
    observed = int(doubled_ranks @ earliness)

    rng = np.random.default_rng(seed)
    null = permuted_dots(
        doubled_ranks, earliness, n_permutations, lambda count: rng.integers(0, 1 << 32, size=count, dtype=np.uint32)
    )
    n_exceed = int(np.count_nonzero(null >= observed))

    to_rho = _spearman_from_raw(doubled_ranks, earliness)
    null_rho = to_rho(null)
    return RankExchangeabilityResult(
        statistic=float(to_rho(observed)),
        p_value=(1 + n_exceed) / (1 + n_permutations),
        n_permutations=n_permutations,
        n_exceed=n_exceed,
        null_mean=float(null_rho.mean()),
        null_std=float(null_rho.std()),
    )


def _spearman_from_raw(doubled_ranks: np.ndarray, earliness: np.ndarray):
    """Map raw sums sum(2 r[pi] e) to Spearman's rho (Pearson correlation of the ranks)."""
    n = doubled_ranks.size
    r_centered = doubled_ranks - doubled_ranks.mean()
    e_centered = earliness - earliness.mean()
    offset = n * doubled_ranks.mean() * earliness.mean()
    scale = np.sqrt((r_centered @ r_centered) * (e_centered @ e_centered))
    return lambda raw: (np.asarray(raw) - offset) / scale


@dataclass(frozen=True)
class ShardTestResult:
    """Outcome of :func:`shard_exchangeability_test` (Oren et al., 2024)."""

    statistic: float  # one-sample t statistic of the shard differences
    p_value: float
    mean_difference: float
    shard_differences: np.ndarray


def shard_exchangeability_test(canonical, permuted) -> ShardTestResult:
    """One-sided t-test that shards are more likely in the canonical order than when shuffled.

    ``canonical[s]`` is the log-likelihood of shard s in the order under test and
    ``permuted[s, j]`` that of its j-th random reordering; d_s = canonical[s] - mean_j permuted[s, j].
    """
    canonical = np.asarray(canonical, dtype=np.float64)
    permuted = np.asarray(permuted, dtype=np.float64)
    if permuted.ndim != 2 or permuted.shape[0] != canonical.shape[0]:
        raise ValueError(
            f"permuted must have shape (shards, permutations) matching canonical ({canonical.shape[0]} shards), "
            f"got {permuted.shape}"
        )
    if canonical.shape[0] < 2:
        raise ValueError("the shard test needs at least 2 shards")
    if not (np.all(np.isfinite(canonical)) and np.all(np.isfinite(permuted))):
        raise ValueError("shard log-likelihoods contain NaN or infinite values")
    differences = canonical - permuted.mean(axis=1)
    if np.ptp(differences) == 0.0:
        raise ValueError(
            "all shard differences are identical (every shard scores the same in any order); "
            "the benchmark has too little text variation for the shard test"
        )
    test = sps.ttest_1samp(differences, 0.0, alternative="greater")
    return ShardTestResult(
        statistic=float(test.statistic),
        p_value=float(test.pvalue),
        mean_difference=float(differences.mean()),
        shard_differences=differences,
    )
