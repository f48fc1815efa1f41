"""Numeric ranges of schema fields, checked on the composed config before any work.

Hydra's structured configs check types, not values. A schema field declares its range with one
of the field makers below (``alpha: float = probability(0.01)``); :func:`validate` walks a
composed config, finds each node's schema and checks every declared range, so a bad value
(``detector.alpha=1.5``, ``detector.permutations=0``) stops the command before anything is
loaded or scored, with the key and the allowed range in the message.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any


class ConfigRangeError(ValueError):
    """A config value outside its allowed range (the message names the key and the range)."""


@dataclass(frozen=True)
class Range:
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    each: bool = False  # the field is a list; every element must lie in the range

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"{'<' if self.high_open else '<='} {self.high:g}"


def _ranged(default: Any, bounds: Range, factory: bool = False):
    if factory:
        return field(default_factory=default, metadata={"range": bounds})
    return field(default=default, metadata={"range": bounds})


def probability(default: float):
    """A probability-like value: strictly between 0 and 1."""
    return _ranged(default, Range(0.0, 1.0, low_open=True, high_open=True))


def fraction(default: float):
    """A share that may be 0 or 1 (e.g. the contaminated fraction of a synthetic model)."""
    return _ranged(default, Range(0.0, 1.0))


def probabilities(default_factory):
    """A list of probability-like values, each strictly between 0 and 1."""
    return _ranged(default_factory, Range(0.0, 1.0, low_open=True, high_open=True, each=True), factory=True)


def at_least(default: Any, minimum: float):
    """A count or size of at least ``minimum`` (None allowed when the default is None)."""
    return _ranged(default, Range(low=minimum))


def positive(default: float):
    return _ranged(default, Range(low=0.0, low_open=True))


def share(default: float):
    """A share in (0, 1]: more than nothing, at most all."""
    return _ranged(default, Range(0.0, 1.0, low_open=True))


def percent(default: float):
    """A percentage in (0, 100]."""
    return _ranged(default, Range(0.0, 100.0, low_open=True))


def validate(cfg: Any, path: str = "") -> None:
    """Check every declared range in ``cfg`` (a composed OmegaConf config), recursively."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(cfg, ListConfig):
        for index, item in enumerate(cfg):
            validate(item, f"{path}[{index}]")
        return
    if not isinstance(cfg, DictConfig):
        return
    schema = OmegaConf.get_type(cfg)
    fields = dataclasses.fields(schema) if dataclasses.is_dataclass(schema) else ()
    declared = {f.name: f.metadata["range"] for f in fields if "range" in f.metadata}
    check_values = getattr(schema, "check_values", None)  # cross-field rules: (node, path) -> problem
    problem = check_values(cfg, path or "config") if check_values is not None else None
    if problem:
        raise ConfigRangeError(problem)
    for key in cfg.keys():
        if OmegaConf.is_missing(cfg, key) or (not path and key == "hydra"):  # Hydra validates its own node
            continue
        name = f"{path}.{key}" if path else str(key)
        value = cfg[key]
        bounds = declared.get(key)
        if bounds is not None and value is not None:
            for item in (list(value) if bounds.each else [value]):
                if not bounds.holds(item):
                    every = " for every element" if bounds.each else ""
                    raise ConfigRangeError(f"{name}={_show(value)} is out of range: allowed {bounds.describe()}{every}")
        validate(value, name)


def _show(value: Any) -> str:
    from omegaconf import OmegaConf

    return str(OmegaConf.to_container(value)) if OmegaConf.is_config(value) else repr(value)
