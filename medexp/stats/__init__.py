"""Statistics engine: permutation tests and shard tests, pure functions over arrays."""

from medexp.stats.permutation import (
    RankExchangeabilityResult,
    ShardTestResult,
    rank_exchangeability,
    shard_exchangeability_test,
)

__all__ = [
    "RankExchangeabilityResult",
    "ShardTestResult",
    "rank_exchangeability",
    "shard_exchangeability_test",
]
