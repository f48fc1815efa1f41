"""Hand-built pieces of synthetic worlds: examples with a given easiness, control configs, cohorts."""

from __future__ import annotations

import numpy as np
from omegaconf import OmegaConf

from medexp.benchmarks.base import Example
from medexp.config.schemas import CompositionSweepConfig, MinkTailConfig, SyntheticControl
from medexp.stats.calibration import Easiness

# Appendix B's cohort (conf/control/synthetic.yaml).
LOW_GAIN = ("low_gain_a", "low_gain_b")
HIGH_GAIN = ("high_gain_a", "high_gain_b", "clean_baseline")


def examples_with_easiness(values) -> list[Example]:
    return [
        Example(f"toy::test::{i}", i, None, f"q{i}", "a", meta={"answer_type": "CLOSED", "easiness": float(value)})
        for i, value in enumerate(values)
    ]


def control(models: dict, noise_sd: float = 1.0, contamination_size: float = 500.0, name: str = "synthetic"):
    """A control config validated by the SyntheticControl schema; ``models``: name -> gain or dict."""
    cohort = {key: value if isinstance(value, dict) else {"gain": value} for key, value in models.items()}
    node = OmegaConf.structured(SyntheticControl)
    return OmegaConf.merge(node, {"name": name, "kind": "synthetic", "cohort": cohort, "noise_sd": noise_sd,
                                  "contamination_size": contamination_size})


def mink_tail_config(**overrides):
    """The audit's mink_tail settings (thresholds 50/100, flag at Pr[Delta > 100] > 5%)."""
    values = {"name": "mink_tail", "family": "mink_tail", "strata": ["answer_type"], "n_permutations": 2000}
    return OmegaConf.merge(OmegaConf.structured(MinkTailConfig), {**values, **overrides})


def sweep_config(**overrides):
    return OmegaConf.merge(OmegaConf.structured(CompositionSweepConfig),
                           {"name": "composition_sweep", "family": "composition_sweep", **overrides})


def fixed_easiness(values):
    """An easiness sampler that ignores its generator and returns ``values`` every time."""
    array = np.asarray(values, dtype=float)
    return lambda rng: Easiness(array, np.ones(array.size, dtype=bool))
