"""Controls: transformations of a detector's inputs that test what a signal really means."""

from __future__ import annotations

import hashlib
from typing import Sequence

from medexp.benchmarks.base import Example
from medexp.config.schemas import ControlKind


def apply_control(control_cfg, examples: Sequence[Example]) -> list[Example]:
    """The examples in the order the detector should test (released order for ``none``)."""
    kind = ControlKind(control_cfg.kind)
    if kind is ControlKind.none:
        return list(examples)
    if kind is ControlKind.order_hash:
        # An order derived from content alone: no model could have trained on it.
        return sorted(examples, key=lambda ex: hashlib.sha1(ex.example_id.encode("utf-8")).hexdigest())
    raise NotImplementedError(f"control kind {kind.value!r}")
