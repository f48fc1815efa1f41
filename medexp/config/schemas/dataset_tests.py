"""Schemas of the dataset-level membership tests (conf/detector/dataset_inference.yaml, codec.yaml):
the cell's model scores the audited split (members) and a held-out split of the same benchmark
(non-members); one p-value says whether the model treats the audited split as seen."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, List

from medexp.config.ranges import at_least, percent, positive
from medexp.config.schemas.detector import FREE_TEXT_FIELDS, DetectorBase


@dataclass
class DatasetTestBase(DetectorBase):
    """Members: the cell's examples (bench.split). Non-members: ``nonmember_split`` of the same
    benchmark, which the model must not have trained on (the demo's heldout split)."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    nonmember_split: str = "heldout"


class MembershipFeature(str, Enum):
    mean_logprob = "mean_logprob"  # mean log p of the answer's tokens (minus the loss)
    min_k = "min_k"  # Min-K%: mean of the lowest K% token log-probs (Shi et al., 2024)
    min_k_pp = "min_k_pp"  # Min-K%++: mean of the lowest K% token z values (Zhang et al., 2025)
    zlib_ratio = "zlib_ratio"  # the answer's log p over its zlib-compressed length in bytes (Carlini et al., 2021)


@dataclass
class DatasetInferenceConfig(DatasetTestBase):
    """LLM Dataset Inference (Maini et al., 2024): membership features aggregated by a logistic
    regression fit on half A of members and non-members, a one-sided Welch t-test on half B."""

    features: List[MembershipFeature] = field(default_factory=lambda: list(MembershipFeature))
    k_percent: float = percent(20.0)  # K of Min-K% and Min-K%++
    regularisation: float = positive(1.0)  # scikit-learn's C: inverse L2 strength on standardised features

    @staticmethod
    def check_values(node, path: str) -> str | None:
        features = list(node.features)
        if not features:
            return f"{path}.features=[] names no feature; choose from {[f.value for f in MembershipFeature]}"
        repeated = sorted({str(f) for f in features if features.count(f) > 1})
        if repeated:
            return f"{path}.features repeats {repeated}"
        return None


@dataclass
class CodecConfig(DatasetTestBase):
    """CoDeC (arXiv 2510.27055): each item scored again after ``n_context`` other items of its own
    split; a model that memorised the split gains less from seeing more of it."""

    n_context: int = at_least(3, 1)  # in-context examples before each item
    # How an in-context example is written; the item itself keeps its question as the model's
    # prompt template renders it, after the context.
    context_template: str = "Question: {question} Answer: {answer}\n"

    @staticmethod
    def check_values(node, path: str) -> str | None:
        template = str(node.context_template)
        missing = [name for name in ("{question}", "{answer}") if name not in template]
        if missing:
            return f"{path}.context_template={template!r} lacks {missing}: an in-context example shows both"
        return None
