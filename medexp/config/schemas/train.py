"""Schemas of differential training: how a trained model is made (a model config's ``train:``
section, conf/model/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from medexp.config.ranges import at_least, fraction, positive, probability
from medexp.config.schemas.bench import BenchConfig


class TrainArm(str, Enum):
    """Which model of a differential pair: both start from the same initial weights."""

    candidate = "candidate"  # trained on the train partition plus the canaries
    independent = "independent"  # trained on the train partition only

    def __str__(self) -> str:  # its value in interpolations: name: demo_vit-${.train.arm}
        return self.value


class TrainMethod(str, Enum):
    full = "full"  # every weight is trained
    lora = "lora"  # LoRA adapters (peft) on the attention projections, plus the classification head
    dp_lora = "dp_lora"  # the same adapters trained with DP-SGD (opacus) to a target epsilon

    def __str__(self) -> str:
        return self.value


@dataclass
class PartitionConfig:
    """Train / canary / test partition of the dataset, fixed across training seeds so that the
    same canaries are scored every time. The canaries are the members; test the non-members."""

    train: float = probability(0.70)
    canary: float = probability(0.15)
    test: float = probability(0.15)
    stratify: bool = True  # keep each class's share in every partition (by the example's answer, its label)
    seed: int = 0


@dataclass
class InitConfig:
    """Where the initial weights come from: a checkpoint (its head replaced for the dataset's
    classes) or, without one, an architecture built from a transformers config."""

    pretrained: Optional[str] = None  # hub id or local directory of an image classifier / backbone
    # or a model config (conf/model) whose weights start this model (built or trained on first
    # use): the offline demo's stand-in for a pretrained foundation checkpoint
    from_model: Optional[str] = None
    model_type: str = "vit"  # transformers model_type of the built architecture (AutoConfig.for_model)
    architecture: Dict[str, Any] = field(default_factory=dict)  # its config values (hidden_size, ...)
    image_size: int = at_least(224, 8)  # built models: the side the image processor resizes to


@dataclass
class LoraSettings:
    rank: int = at_least(8, 1)
    alpha: int = at_least(16, 1)
    dropout: float = fraction(0.0)
    # transformers 5 names ViT's attention projections q_proj/k_proj/v_proj/o_proj
    target_modules: List[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    head_modules: List[str] = field(default_factory=lambda: ["classifier"])  # trained in full


DP_ACCOUNTANTS = ("rdp", "prv", "gdp")  # opacus.accountants


@dataclass
class DPSettings:
    """DP-SGD (opacus): per-sample clipping at max_grad_norm, Gaussian noise calibrated so that
    the whole training reaches target_epsilon at target_delta (Poisson-sampled batches)."""

    target_epsilon: float = positive(1.0)
    delta: float = probability(1e-5)
    max_grad_norm: float = positive(1.0)
    accountant: str = "rdp"  # opacus accountant: rdp, prv or gdp

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if str(node.accountant) not in DP_ACCOUNTANTS:
            return f"{path}.accountant={node.accountant!r} is not an opacus accountant; use one of {list(DP_ACCOUNTANTS)}"
        return None


@dataclass
class TrainSpec:
    """How one trained classifier is made. Everything here but ``replicate_seeds`` names the
    weights: the model is trained once per distinct spec and cached by it."""

    data: BenchConfig = MISSING  # the classification dataset (an example's answer is its class)
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    arm: TrainArm = TrainArm.candidate
    method: TrainMethod = TrainMethod.full
    seed: int = 123  # initialisation of new weights (head, adapters) and data order
    # The seeds of this model's replicate pairs: the train app trains both arms for each, and the
    # memorization detectors average over them (the paper's 123, 456, 789, 1024).
    replicate_seeds: List[int] = field(default_factory=lambda: [123])
    init: InitConfig = field(default_factory=InitConfig)
    epochs: int = at_least(30, 1)
    batch_size: int = at_least(64, 1)
    learning_rate: float = positive(1e-4)
    weight_decay: float = at_least(0.0, 0.0)  # AdamW with a cosine-annealed learning rate
    lora: LoraSettings = field(default_factory=LoraSettings)
    dp: DPSettings = field(default_factory=DPSettings)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if not len(node.replicate_seeds):
            return f"{path}.replicate_seeds=[] names no seed: a trained model needs at least one (e.g. [123])"
        return None
