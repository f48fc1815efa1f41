"""Schema of the ``python -m medexp.train`` app (conf/train/train.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from medexp.config.ranges import at_least
from medexp.config.schemas.root import PathsConfig, TrackingConfig


@dataclass
class TrainAppConfig:
    """``python -m medexp.train`` (conf/train/train.yaml)."""

    # Model configs (conf/model) to train: a trained model (source: trained) for both arms and
    # every seed of its train.replicate_seeds; a demo model (source: demo) is built.
    models: List[str] = field(default_factory=list)
    seeds: Optional[List[int]] = None  # replaces every trained model's replicate_seeds when set
    # Also build this many reference models of each listed leaky demo model (membership's
    # detector.trained_references: its recipe over random halves of these splits' examples, the
    # cell's members and non-members), as a membership cell would build them on first use.
    references: int = at_least(0, 0)
    reference_splits: List[str] = field(default_factory=lambda: ["test", "heldout"])
    paths: PathsConfig = field(default_factory=PathsConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        if node.seeds is not None and not len(node.seeds):
            return "seeds=[] names no seed: give at least one, or null for each model's train.replicate_seeds"
        if node.references and not len(node.reference_splits):
            return "reference_splits=[] names no split: the references train on random halves of these splits' examples"
        return None
