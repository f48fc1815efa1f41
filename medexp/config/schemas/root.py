"""The primary config of `python -m medexp`, its tracking and paths sections."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING, OmegaConf

from medexp.config.ranges import at_least, positive
from medexp.config.schemas.bench import BenchConfig
from medexp.config.schemas.model import ModelConfig


@dataclass
class TrackingConfig:
    uri: Optional[str] = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<root>/mlruns/mlflow.db
    experiment: str = "medexp"
    artifact_root: Optional[str] = None  # None: <root>/mlruns/artifacts for the default store
    # A tracking server that does not answer within this many seconds is reported unreachable
    # (MLflow's own retries would take minutes).
    connect_timeout_s: float = positive(10.0)
    # A running run writes a heartbeat tag this often; a RUNNING run of another host whose
    # heartbeat is older than stale_after_s is taken for a lost node and ended KILLED.
    heartbeat_s: float = positive(60.0)
    stale_after_s: float = positive(900.0)
    # A tracking call that fails for a transient reason (a reset connection, a 5xx, a locked
    # store) is tried again this many times, waiting retry_backoff_s, then twice that, ...
    retries: int = at_least(3, 0)
    retry_backoff_s: float = at_least(0.5, 0.0)


@dataclass
class PathsConfig:
    root: str = MISSING  # project root: anchors mlruns/ whatever Hydra's output directory is
    cache_dir: str = MISSING  # demo data, demo models and score tables


@dataclass
class SplitConfig:
    """One cell's work shared by several jobs (docs/clusters.md, "Work bigger than one job"): with
    ``tasks`` > 1 this job is task ``task`` of ``tasks`` jobs filling the cell's cache entries
    together (scores, embeddings); it tracks no run. The cell run without ``split`` then reads the
    filled entries and logs the cell."""

    tasks: int = at_least(1, 1)
    task: int = at_least(0, 0)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        # A count below 1 is tasks' own range error (checked after this rule), not task's.
        if int(node.tasks) >= 1 and int(node.task) >= int(node.tasks):
            return f"{path}.task={node.task} is out of range: a task of {node.tasks} is numbered 0..{int(node.tasks) - 1}"
        return None


# Sections of Config that change no cell's result: recompute, where the runs go, where files live,
# how the cell's work is split across jobs. Everything else is a cell's settings (medexp.runner.settings).
RUN_NEUTRAL_KEYS = ("force", "paths", "tracking", "split")


@dataclass
class Config:
    seed: int = 0
    force: bool = False  # recompute a cell even when a finished run with its key exists
    family: str = MISSING  # multiple-testing family of the cell's p-value (tag medexp.family)
    paths: PathsConfig = field(default_factory=PathsConfig)
    model: ModelConfig = MISSING
    bench: BenchConfig = MISSING
    detector: Any = MISSING
    control: Any = MISSING
    judge: Any = MISSING  # how an answering detector's replies are judged (conf/judge/)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    split: SplitConfig = field(default_factory=SplitConfig)

    @staticmethod
    def check_values(node, path: str) -> str | None:
        """Rules across the axes (called by medexp.config.ranges.validate)."""
        model, detector = node.get("model"), node.get("detector")
        if model is None or detector is None or OmegaConf.is_missing(node, "model"):
            return None
        name = str(model.get("name"))
        for index, pair in enumerate(detector.get("pairs") or []):
            candidate = str(pair.get("candidate") or name)
            independent = pair.get("independent") or (model.get("independent") if candidate == name else None)
            if independent is not None and str(independent) == candidate:
                return (f"detector.pairs[{index}] pairs model {candidate} with itself (candidate and independent): "
                        "a differential audit compares two models, one of which did not see the examples")
        return None
