"""Differential pairs: which model configs form (candidate, independent) pairs, and their
replicates over training seeds.

* A trained model's counterpart is its own independent arm (the same spec, ``train.arm:
  independent``); any other model names its counterpart in its config's ``independent`` key
  (demo_leaky: demo_clean).
* A replicate is the pair retrained with another seed: ``train.seed`` of a trained model,
  ``demo.seed`` of a demo model. A trained model's replicates are its ``train.replicate_seeds``
  unless seeds are given; a hub checkpoint has no seed to vary.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

from omegaconf import DictConfig, OmegaConf


@dataclass(frozen=True)
class ModelPairConfigs:
    candidate: DictConfig
    independent: DictConfig
    seed: int | None = None  # the replicate's training seed (None: the models as configured)

    @property
    def label(self) -> str:
        seed = "" if self.seed is None else f" (seed {self.seed})"
        return f"{self.candidate.name} vs {self.independent.name}{seed}"


def is_trained(model_cfg) -> bool:
    from medexp.config.schemas import ModelSource

    return ModelSource(model_cfg.source) is ModelSource.trained


def with_seed(model_cfg, seed: int) -> DictConfig:
    """The model config retrained with ``seed`` (trained: train.seed; demo: demo.seed)."""
    from medexp.config.schemas import ModelSource

    source = ModelSource(model_cfg.source)
    key = {ModelSource.trained: "train.seed", ModelSource.demo: "demo.seed"}.get(source)
    if key is None or OmegaConf.select(model_cfg, key.split(".")[0]) is None:
        raise ValueError(f"model={model_cfg.name} (source {source.value}) has no training seed to vary; "
                         "list its replicate pairs by name in detector.pairs instead of detector.seeds")
    variant = copy.deepcopy(model_cfg)
    OmegaConf.update(variant, key, int(seed))
    return variant


def counterpart(model_cfg) -> DictConfig:
    """The independent model of ``model_cfg`` (see the module docstring)."""
    from medexp.config import listed_model_config
    from medexp.config.schemas import TrainArm

    if is_trained(model_cfg):
        variant = copy.deepcopy(model_cfg)
        OmegaConf.update(variant, "train.arm", TrainArm.independent.value)
        return variant
    if not model_cfg.get("independent"):
        raise ValueError(f"model={model_cfg.name} names no independent counterpart: set `independent:` in its "
                         "config, or name the pair's independent model in detector.pairs")
    return listed_model_config(str(model_cfg.independent))


def replicate_seeds(model_cfg, seeds: Sequence[int] | None) -> list[int | None]:
    """The seeds a model's pairs are replicated over; [None] means the model as configured."""
    if seeds is not None:
        return [int(seed) for seed in seeds]
    if is_trained(model_cfg):
        return [int(seed) for seed in model_cfg.train.replicate_seeds]
    return [None]


def seeded_pair(candidate, independent_name: str | None, seed: int | None) -> ModelPairConfigs:
    """The pair of ``candidate`` retrained with ``seed`` (None: as configured): its counterpart,
    or the model config ``independent_name``, retrained with the same seed."""
    from medexp.config import listed_model_config

    seeded = candidate if seed is None else with_seed(candidate, seed)
    if independent_name is None and is_trained(seeded):
        return ModelPairConfigs(seeded, counterpart(seeded), seed)  # the same spec: the seed comes along
    independent = counterpart(candidate) if independent_name is None else listed_model_config(str(independent_name))
    return ModelPairConfigs(seeded, independent if seed is None else with_seed(independent, seed), seed)


def resolve_pairs(cell_model, pairs: Sequence, seeds: Sequence[int] | None) -> list[ModelPairConfigs]:
    """The (candidate, independent) model configs of ``pairs`` (detector.pairs entries), each
    replicated over the seeds; a candidate of None is ``cell_model``."""
    from medexp.config import listed_model_config
    from medexp.config.schemas import TrainArm

    if not pairs:
        raise ValueError("detector.pairs is empty: name at least one (candidate, independent) pair")
    resolved = []
    for entry in pairs:
        candidate = cell_model if entry.candidate is None else listed_model_config(str(entry.candidate))
        if is_trained(candidate) and TrainArm(candidate.train.arm) is not TrainArm.candidate:
            raise ValueError(f"model={candidate.name} is an independent arm (train.arm=independent); "
                             "the candidate of a pair must be the arm that saw the canaries")
        independent = None if entry.independent is None else str(entry.independent)
        resolved += [seeded_pair(candidate, independent, seed) for seed in replicate_seeds(candidate, seeds)]
    return resolved
