"""Schemas of the exchangeability detectors (conf/detector/exch.yaml, exch_rank.yaml): is the
released order likelier than a shuffled one?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from medexp.config.ranges import at_least
from medexp.config.schemas.detector import FREE_TEXT_FIELDS, DetectorBase


@dataclass
class ExchConfig(DetectorBase):
    """Oren et al. sharded likelihood comparison on text concatenations."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    model_needs_reason: ClassVar[str] = "the model itself, to score shards of the benchmark as text in shuffled orders"
    shards: int = at_least(50, 2)
    permutations: int = at_least(250, 1)
    text_template: str = "Question: {question}\nAnswer: {answer}\n"
    context_length: int = at_least(1024, 2)  # longer concatenations are scored with a sliding window
    stride: int = at_least(512, 1)  # < context_length
    batch_size: int = at_least(32, 1)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        """Cross-field ranges (called by medexp.config.ranges.validate)."""
        if node.stride >= node.context_length:
            return f"{path}.stride={node.stride} must be smaller than {path}.context_length={node.context_length}"
        return None


@dataclass
class ExchRankConfig(DetectorBase):
    """Permutation test of Spearman(position, per-example log-likelihood)."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    model_needs: ClassVar[str] = "scores"
    n_permutations: int = at_least(10000, 1)
    score: str = "sum_logprob"
