"""Structured-config schemas for every config group.

Registered in Hydra's ConfigStore by :func:`register_schemas`, so that a YAML file with a wrong
type or an unknown key fails at composition with a message naming the offending key.
Model, benchmark and tracking configs share one schema each; detectors and controls have one
schema per kind, selected by the YAML file's defaults list (``/schema/detector@_here_: exch``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from omegaconf import MISSING


class ModelFamily(str, Enum):
    """Adapter families; a model of a listed family needs only a YAML file."""

    generic = "generic"  # any AutoModelForImageTextToText checkpoint with an AutoProcessor


class ModelSource(str, Enum):
    hub = "hub"  # a hub id or a local directory written by save_pretrained
    demo = "demo"  # built and trained offline by medexp.demo, then loaded like a hub model


class DType(str, Enum):
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class BenchFormat(str, Enum):
    local = "local"  # JSONL rows with image paths relative to the root
    demo = "demo"  # the generated offline benchmark, written in the local format


class ControlKind(str, Enum):
    none = "none"
    order_hash = "order_hash"


@dataclass
class DemoBenchConfig:
    n_test: int = 400
    n_train: int = 1200
    seed: int = 20261121


@dataclass
class DemoModelConfig:
    """How an offline demo model is built (medexp.demo.models)."""

    seed: int = 0
    train_epochs: int = 4
    hidden_size: int = 96
    num_layers: int = 2
    vocab_size: int = 1024
    image_size: int = 32
    learning_rate: float = 3e-3
    batch_size: int = 32
    # The leak shows the test set as text documents in this format, in released order.
    document_template: str = "Question: {question}\nAnswer: {answer}\n"
    document_examples: int = 8  # consecutive examples per training document
    bench: DemoBenchConfig = field(default_factory=DemoBenchConfig)  # the data it trains on
    # Planted contamination: after base training, `leak_epochs` passes over the demo test set
    # (VQA pairs, and text documents of neighbouring examples in released order). 0 = clean.
    leak_epochs: int = 0
    leak_learning_rate: float = 3e-3
    leak_batch_size: int = 8


@dataclass
class ModelConfig:
    name: str = MISSING
    family: ModelFamily = ModelFamily.generic
    source: ModelSource = ModelSource.hub
    pretrained: Optional[str] = None  # hub id or local path; unused for demo models
    revision: Optional[str] = None
    dtype: DType = DType.float32
    device: str = "auto"  # "auto" picks cuda when available, else cpu
    trust_remote_code: bool = False
    prompt_template: str = "{question}"
    use_chat_template: bool = True
    batch_size: int = 16
    demo: Optional[DemoModelConfig] = None


@dataclass
class BenchConfig:
    name: str = MISSING
    format: BenchFormat = BenchFormat.local
    root: Optional[str] = None
    split: str = "test"
    max_examples: Optional[int] = None  # keep the first N in released order
    demo: Optional[DemoBenchConfig] = None


@dataclass
class DetectorBase:
    name: str = MISSING
    family: str = MISSING  # the multiple-testing family the cell's p-value belongs to
    alpha: float = 0.01  # flag when p_value < alpha


@dataclass
class ExchConfig(DetectorBase):
    """Oren et al. sharded likelihood comparison on text concatenations."""

    shards: int = 50
    permutations: int = 250
    text_template: str = "Question: {question}\nAnswer: {answer}\n"
    context_length: int = 1024  # longer concatenations are scored with a sliding window
    stride: int = 512
    batch_size: int = 32


@dataclass
class ExchRankConfig(DetectorBase):
    """Permutation test of Spearman(position, per-example log-likelihood)."""

    n_permutations: int = 10000
    score: str = "sum_logprob"


@dataclass
class ControlBase:
    name: str = MISSING
    kind: ControlKind = MISSING


@dataclass
class TrackingConfig:
    uri: Optional[str] = None  # None: $MLFLOW_TRACKING_URI, else sqlite:///<root>/mlruns/mlflow.db
    experiment: str = "medexp"
    artifact_root: Optional[str] = None  # None: <root>/mlruns/artifacts for the default store


@dataclass
class PathsConfig:
    root: str = MISSING  # project root: anchors mlruns/ whatever Hydra's output directory is
    cache_dir: str = MISSING  # demo data, demo models and score tables


@dataclass
class Config:
    seed: int = 0
    force: bool = False  # recompute a cell even when a finished run with its key exists
    paths: PathsConfig = field(default_factory=PathsConfig)
    model: ModelConfig = MISSING
    bench: BenchConfig = MISSING
    detector: Any = MISSING
    control: Any = MISSING
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


DETECTOR_SCHEMAS = {"exch": ExchConfig, "exch_rank": ExchRankConfig}
CONTROL_SCHEMAS = {"base": ControlBase}


def register_schemas() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="config_schema", node=Config)
    for name, node in DETECTOR_SCHEMAS.items():
        store.store(group="schema/detector", name=name, node=node)
    for name, node in CONTROL_SCHEMAS.items():
        store.store(group="schema/control", name=name, node=node)
