"""Statistics engine: permutation tests, shard tests, cohort tests and multiple-testing
corrections, pure functions over arrays."""

from medexp.stats.cohort import (
    CohortRelabelResult,
    TopKOverlap,
    cohort_relabel_test,
    deltas_vs_cohort,
    top_k_indices,
    top_k_overlap,
)
from medexp.stats.multiple_testing import adjust_pvalues
from medexp.stats.permutation import (
    RankExchangeabilityResult,
    ShardTestResult,
    rank_exchangeability,
    shard_exchangeability_test,
)

__all__ = [
    "CohortRelabelResult",
    "RankExchangeabilityResult",
    "ShardTestResult",
    "TopKOverlap",
    "adjust_pvalues",
    "cohort_relabel_test",
    "deltas_vs_cohort",
    "rank_exchangeability",
    "shard_exchangeability_test",
    "top_k_indices",
    "top_k_overlap",
]
