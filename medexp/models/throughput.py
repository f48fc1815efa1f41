"""GPU throughput measured for the audited checkpoints: what ``python -m medexp.plan`` turns the
cost model's FLOPs into hours with.

``measured/*.json`` is the raw output of ``perf/gpu_families.py`` on a lent GPU: each family's
published checkpoint, its architecture at full size with random weights in bfloat16, scoring a
SLAKE-shaped set (512 x 512 scans, eleven questions each) through medexp's own scorer with the
model's shipped settings, whole and with shared prefixes. A rate is the FLOPs
:mod:`medexp.models.cost` counts for that set (the count plan uses) over the measured seconds, so
plan's hours at a measured rate are a measured time scaled by FLOPs, not an assumed fraction of a
datasheet peak. A rate holds for the checkpoint measured, on that GPU and software; another
checkpoint of the family (other widths, other image rules) has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

MEASUREMENT = Path(__file__).resolve().parent / "measured" / "gpu_families_h200_2026-11-27.json"


@dataclass(frozen=True)
class MeasuredRate:
    """Achieved TFLOP/s (cost-model FLOPs over seconds) of one checkpoint on the measured GPU."""

    whole: float
    shared: float | None  # with shared prefixes; None: the family scores examples whole


@lru_cache(maxsize=None)
def _report() -> dict:
    return json.loads(MEASUREMENT.read_text())


def measured_on() -> str:
    """Where and with what the rates were measured, in words."""
    report = _report()
    return f"{report['device']} on {report['date']}, torch {report['torch']}, transformers {report['transformers']}"


def _measured() -> dict[str, MeasuredRate]:
    """Family -> its published checkpoint's measured rate."""
    rates = {}
    for model in _report()["models"]:
        if "error" in model:
            continue
        shared = model.get("shared_prefix")
        rates[model["family"]] = MeasuredRate(model["plain"]["achieved_tflops"],
                                              None if shared is None else shared["achieved_tflops"])
    return rates


def measured_rate(model_cfg) -> MeasuredRate | None:
    """The measured rate of the model's checkpoint, or None where it was not measured (only each
    family's published checkpoint was, so a measured family has published settings)."""
    from medexp.models.published import published_settings

    family = getattr(model_cfg.family, "value", model_cfg.family)
    rate = _measured().get(family)
    if rate is None or model_cfg.pretrained != published_settings(family)["checkpoint"]:
        return None
    return rate
