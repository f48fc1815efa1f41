"""Schemas of the differential detectors (conf/detector/memorization.yaml, membership.yaml): losses
of candidate/independent model pairs on members and non-members."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, List, Optional

from medexp.config.ranges import at_least, fraction, probabilities, probability
from medexp.config.schemas.detector import FREE_TEXT_FIELDS, DetectorBase


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
    lira = "lira"  # offline Gaussian LiRA: the candidate's logit confidence against its OUT reference models
    # the two below need trained_references (each example IN for some references, OUT for others)
    lira_online = "lira_online"  # online LiRA: likelihood ratio of the IN and OUT Gaussians per example
    rmia = "rmia"  # RMIA (Zarifzadeh et al., 2024): p(x|target)/Pr(x), compared pairwise with the non-members


# Attacks that need reference models which trained on some of the examples (trained_references).
ATTACKS_NEEDING_IN_REFERENCES = (MembershipAttack.lira_online, MembershipAttack.rmia)


class LiraVariance(str, Enum):
    pooled = "pooled"  # one variance over all examples (Carlini et al.'s choice with few references)
    per_example = "per_example"  # each example's own variance over the references (needs >= 2)


@dataclass
class MembershipConfig(DifferentialDetectorBase):
    """Membership inference: members (canaries) against non-members, five attacks."""

    attack: MembershipAttack = MembershipAttack.mx  # whose AUC permutation test is the cell's p_value
    fprs: List[float] = probabilities(lambda: [0.01, 0.001, 0.0001])  # report TPR at these FPRs, each in (0, 1)
    # Models that saw no example of the cell (conf/model names) joining the pairs' independent
    # models as LiRA's reference (OUT) models.
    reference_models: List[str] = field(default_factory=list)
    lira_variance: LiraVariance = LiraVariance.pooled
    # Reference models trained for this audit (demo candidates: medexp.demo's reference builds,
    # also `python -m medexp.train references=N`): the candidate's recipe with its training data
    # replaced by a random half of the cell's members and non-members, halves 2k and 2k+1
    # complementary. They give LiRA per-example IN and OUT distributions (lira_online; lira uses
    # their OUT side) and RMIA its Pr(x). 0: none (lira_online and rmia are not computed).
    trained_references: int = at_least(0, 0)
    # RMIA: x beats population example z when (p(x|target)/Pr(x)) / (p(z|target)/Pr(z)) >= gamma;
    # Pr(x) is the mean over every reference (online) or, with rmia_offline_a, from the OUT ones.
    rmia_gamma: float = at_least(1.0, 1.0)
    rmia_offline_a: Optional[float] = fraction(None)
    # The distribution-shift control: a classifier on the inputs alone (no model), its AUC
    # cross-validated over shift_folds stratified folds and tested with shift_permutations label
    # permutations (p floor 1/(P+1)); shift_confounded when its p < alpha.
    shift_folds: int = at_least(5, 2)
    shift_permutations: int = at_least(499, 1)
    # Per-example membership: the members whose conformal p-value (against the non-members, by
    # `attack`) survives Benjamini-Hochberg at this false-discovery rate.
    fdr: float = probability(0.1)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if not len(node.fprs):
            return f"{path}.fprs=[] names no false-positive rate to report the TPR at (e.g. [0.01, 0.001])"
        if MembershipAttack(node.attack) in ATTACKS_NEEDING_IN_REFERENCES and node.trained_references < 2:
            return (f"{path}.attack={MembershipAttack(node.attack).value} compares each example's IN and OUT reference "
                    f"models: set {path}.trained_references to at least 2 (8 in detector=membership_references)")
        return DifferentialDetectorBase.check_values(node, path)
