"""Statistics engine: permutation tests, shard tests, cohort tests, ROC statistics of
membership scores, summaries and multiple-testing corrections, pure functions over arrays."""

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
    PERMUTATION_ENGINE,
    RankExchangeabilityResult,
    ShardTestResult,
    rank_exchangeability,
    shard_exchangeability_test,
)
from medexp.stats.roc import (
    AUCTest,
    YoudenPoint,
    auc_bootstrap_ci,
    auc_permutation_test,
    mean_auc,
    tpr_at_fpr,
    youden_point,
)
from medexp.stats.summaries import MeanCI, SignTest, mean_ci, mean_difference_test, sign_test, spearman, within_group

__all__ = [
    "AUCTest",
    "CohortRelabelResult",
    "MeanCI",
    "PERMUTATION_ENGINE",
    "RankExchangeabilityResult",
    "ShardTestResult",
    "SignTest",
    "TopKOverlap",
    "YoudenPoint",
    "adjust_pvalues",
    "auc_bootstrap_ci",
    "auc_permutation_test",
    "cohort_relabel_test",
    "deltas_vs_cohort",
    "mean_auc",
    "mean_ci",
    "mean_difference_test",
    "rank_exchangeability",
    "shard_exchangeability_test",
    "sign_test",
    "spearman",
    "top_k_indices",
    "top_k_overlap",
    "tpr_at_fpr",
    "within_group",
    "youden_point",
]
