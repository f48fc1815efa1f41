"""Schemas of the control axis (conf/control/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, List

from omegaconf import MISSING

from medexp.config.ranges import at_least, fraction, percent
from medexp.config.schemas.bench import BenchConfig


class ControlKind(str, Enum):
    """What a control does to a cell's inputs (conf/control/)."""

    none = "none"  # the benchmark in its released order
    order_hash = "order_hash"  # ordering ablation: sorted by SHA-1 of example_id
    order_answer_len = "order_answer_len"  # ordering ablation: sorted by answer token count (a known confound)
    order_mink = "order_mink"  # ordering ablation: sorted by the model's per-example Min-K%++ score
    external_baseline = "external_baseline"  # pre-domain baselines join the cohort and are tested too
    negative_images = "negative_images"  # an out-of-domain image set replaces the benchmark's images
    blind_image = "blind_image"  # every example scored without its image
    synthetic = "synthetic"  # scores drawn from the calibration model s = g e + b + eps + delta

@dataclass
class ControlBase:
    name: str = MISSING
    kind: ControlKind = MISSING


@dataclass
class OrderMinkControl(ControlBase):
    k_percent: float = percent(20.0)  # the per-example score sorted by: mean of the lowest K% of Min-K%++ z


@dataclass
class ExternalBaselineControl(ControlBase):
    """Pre-domain baseline models (conf/model names): added to a cohort detector's cohort, and
    the cell's detector is run on each of them too (metrics ``baseline_<name>_<metric>``)."""

    baselines: List[str] = field(default_factory=lambda: ["blip2", "instructblip"])


@dataclass
class NegativeImagesControl(ControlBase):
    """image_nn on an out-of-domain image set instead of the benchmark's images, same tau."""

    images: BenchConfig = MISSING  # composed from conf/bench by the control's defaults list


@dataclass
class SyntheticModel:
    """One model of the calibration model s_im = gain e_i + offset + eps_im + delta_im."""

    gain: float = 1.0
    offset: float = 0.0
    contaminated_fraction: float = fraction(0.0)  # share of examples with delta_im > 0 (planted contamination)


@dataclass
class SyntheticControl(ControlBase):
    """Replaces model scores by draws from the calibration model (section 4.10, Appendix B).

    Easiness e_i comes from the benchmark (``bench=synthetic``: meta ``easiness``); the cell's
    model name must be one of ``cohort``; every other cohort member is a reference model.
    """

    cohort: Dict[str, SyntheticModel] = field(default_factory=dict)
    noise_sd: float = at_least(1.0, 0.0)  # eps_im ~ N(0, noise_sd^2), independent per model and example
    contamination_size: float = 500.0  # delta_im on a contaminated example (nats)
