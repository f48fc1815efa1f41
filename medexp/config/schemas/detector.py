"""Schemas of the detector axis (conf/detector/): one dataclass per detector kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, List, Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least, percent, positive, probabilities, probability


# The example fields a detector reads (medexp.benchmarks.skips): a benchmark row whose other
# fields are unusable (an empty answer, options with a gap) is kept for it, not skipped.
QUESTION_FIELDS = ("question", "answer", "options")  # answering a question, options included
FREE_TEXT_FIELDS = ("question", "answer")  # scoring the gold answer as text: no options


@dataclass
class DetectorBase:
    example_fields: ClassVar[tuple[str, ...]] = QUESTION_FIELDS
    name: str = MISSING
    family: str = MISSING  # the multiple-testing family the cell's p-value belongs to
    alpha: float = probability(0.01)  # flag when p_value < alpha


@dataclass
class ExchConfig(DetectorBase):
    """Oren et al. sharded likelihood comparison on text concatenations."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
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
    n_permutations: int = at_least(10000, 1)
    score: str = "sum_logprob"


class RankBy(str, Enum):
    score = "score"  # the model's own per-example score
    delta = "delta"  # the score minus the median of the other cohort models on the same example


@dataclass
class CohortDetectorBase(DetectorBase):
    """A detector comparing the cell's model with reference models on the same examples."""

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    # Model config names (conf/model/<name>.yaml) scored next to the cell's model; an entry
    # naming the cell's own model is skipped, so a model is never its own reference.
    cohort: List[str] = field(default_factory=list)
    n_permutations: int = at_least(10000, 1)  # cohort-relabel permutation test (p floor 1/(P+1))


@dataclass
class MinkTailConfig(CohortDetectorBase):
    """Min-K%++ cohort tail enrichment (Detector 3); defaults are the controlled audit's."""

    k_percent: float = percent(20.0)  # m_i = mean of the lowest K% (at least one) of the answer's z_t
    thresholds: List[float] = field(default_factory=lambda: [50.0, 100.0])  # report Pr[Delta > t]
    flag_threshold: float = 100.0
    flag_fraction: float = probability(0.05)  # flag when Pr[Delta > flag_threshold] > flag_fraction
    strata: List[str] = field(default_factory=lambda: ["answer_type", "content_type", "modality"])


@dataclass
class TopKJaccardConfig(CohortDetectorBase):
    """Cross-model top-K overlap of Min-K%++ scores (Detector 4)."""

    top_k: int = at_least(25, 1)
    k_percent: float = percent(20.0)
    rank_by: RankBy = RankBy.score
    flag_lift: float = positive(10.0)  # a pair is flagged when its overlap is >= this many times chance


@dataclass
class LossConfig(CohortDetectorBase):
    """Loss attack: per-example mean negative log-likelihood of the gold answer."""

    rank_by: RankBy = RankBy.score  # score: the target's own NLL; delta: its NLL gap to the cohort
    top_n: int = at_least(25, 1)  # examples shown as the top-ranked in the figure


@dataclass
class CompositionSweepConfig(DetectorBase):
    """Appendix B, Fig. 7b: how often mink_tail flags a clean probe as the cohort gains
    low-gain outliers. Descriptive (no p-value); runs under control=synthetic only.

    For k = 0..max_outliers and each of ``draws`` fresh synthetic benchmarks (drawn like
    bench.synthetic), the cohort is the probe, ``n_anchors`` anchors and k outliers, all with
    offset 0, no contamination and noise control.noise_sd; the probe is flagged by the
    mink_tail rule Pr[Delta > flag_threshold] > flag_fraction.
    """

    n_anchors: int = at_least(2, 1)
    anchor_gain: float = 1.0
    probe_gain: float = 1.0
    outlier_gain: float = 0.05
    max_outliers: int = at_least(4, 0)
    draws: int = at_least(200, 1)
    flag_threshold: float = 100.0
    flag_fraction: float = probability(0.05)


@dataclass
class ModelPair:
    """A candidate and its independent counterpart (model config names, conf/model/)."""

    candidate: Optional[str] = None  # None: the cell's model
    # None: the candidate's counterpart: its config's `independent`, or, for a trained model,
    # its independent arm (same spec, train.arm=independent).
    independent: Optional[str] = None


@dataclass
class DifferentialDetectorBase(DetectorBase):
    """Detectors over the losses of candidate/independent pairs on members and non-members.

    Members: a trained candidate's canary partition (the cell's benchmark must be the data it
    trained on); otherwise the cell's examples, which the candidate saw. Non-members: a trained
    candidate's test partition; otherwise the split ``nonmember_split`` of the cell's benchmark.
    """

    example_fields: ClassVar[tuple[str, ...]] = FREE_TEXT_FIELDS
    pairs: List[ModelPair] = field(default_factory=lambda: [ModelPair()])
    # Each pair is repeated for these training seeds (train.seed of trained models, demo.seed of
    # demo models). None: a trained model's train.replicate_seeds; other models as configured.
    seeds: Optional[List[int]] = None
    nonmember_split: Optional[str] = "heldout"
    class_field: str = "answer"  # the class of an example: its answer (a classifier's label) or a meta field
    n_permutations: int = at_least(10000, 1)  # member/non-member relabelling test (p floor 1/(P+1))
    n_bootstrap: int = at_least(1000, 1)
    ci_level: float = probability(0.95)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        """Pairs and seeds (called by medexp.config.ranges.validate; a pair that names the cell's
        model as its independent is refused where the cell's model is known, in the evaluator)."""
        if not node.pairs:
            return f"{path}.pairs is empty: name at least one (candidate, independent) pair, or leave the default"
        for index, pair in enumerate(node.pairs):
            if pair.candidate is not None and pair.candidate == pair.independent:
                return (f"{path}.pairs[{index}] pairs model {pair.candidate} with itself: M(x) and membership "
                        "compare two models, one of which did not see the examples")
        if node.seeds is not None:
            if not len(node.seeds):
                return f"{path}.seeds=[] names no seed: give at least one, or null for the models as configured"
            repeated = sorted({seed for seed in node.seeds if list(node.seeds).count(seed) > 1})
            if repeated:
                return f"{path}.seeds repeats {repeated}: each replicate pair is trained once per seed"
        return None


@dataclass
class MemorizationConfig(DifferentialDetectorBase):
    """Per-canary memorization M(x) = L_ind(x) - L_cand(x), averaged over the pairs."""

    # Per-class mean M: LOW <= first < MODERATE <= second < HIGH (the paper's 0.1 and 0.3)
    risk_tiers: List[float] = field(default_factory=lambda: [0.1, 0.3])

    @staticmethod
    def check_values(node, path: str) -> str | None:
        tiers = list(node.risk_tiers)
        if len(tiers) != 2 or not tiers[0] < tiers[1]:
            return f"{path}.risk_tiers={tiers} must be two increasing bounds [low, high] (the paper's [0.1, 0.3])"
        return DifferentialDetectorBase.check_values(node, path)
    # An image embedder (conf/embedder) for per-canary atypicality: cosine distance to the class
    # centroid. None: no atypicality.
    embedder: Any = None


class MembershipAttack(str, Enum):
    loss = "loss"  # the candidate's loss (Yeom et al.): low loss, member
    independent_loss = "independent_loss"  # the independent model's loss: a control, ~0.5 unless members differ
    confidence_ratio = "confidence_ratio"  # log p_cand(answer) - log p_ind(answer), whole answer
    mx = "mx"  # M(x) = L_ind - L_cand, mean loss per answer token
    lira = "lira"  # offline Gaussian LiRA: the candidate's logit confidence against reference models


class LiraVariance(str, Enum):
    pooled = "pooled"  # one variance over all examples (Carlini et al.'s choice with few references)
    per_example = "per_example"  # each example's own variance over the references (needs >= 2)


@dataclass
class MembershipConfig(DifferentialDetectorBase):
    """Membership inference: members (canaries) against non-members, five attacks."""

    attack: MembershipAttack = MembershipAttack.mx  # whose AUC permutation test is the cell's p_value
    fprs: List[float] = probabilities(lambda: [0.01, 0.001])  # report TPR at these FPRs, each in (0, 1)
    # Models that saw no example of the cell (conf/model names) joining the pairs' independent
    # models as LiRA's reference (OUT) models.
    reference_models: List[str] = field(default_factory=list)
    lira_variance: LiraVariance = LiraVariance.pooled

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if not len(node.fprs):
            return f"{path}.fprs=[] names no false-positive rate to report the TPR at (e.g. [0.01, 0.001])"
        return DifferentialDetectorBase.check_values(node, path)
