"""What every detector returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd


@dataclass
class DetectorResult:
    """Scalars, a table and figures of one cell.

    A test's metrics always include p_value, statistic, n_examples and flag; a *descriptive*
    result (a simulation summary such as composition_sweep) tests nothing and needs only
    n_examples.
    """

    metrics: dict[str, float]
    table: Optional[pd.DataFrame] = None
    table_name: str = "per_example"
    figures: dict[str, Any] = field(default_factory=dict)  # file stem (may hold a folder) -> matplotlib Figure
    extra_tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # file stem -> further tables
    descriptive: bool = False
    # What the reader of this cell must know (a degenerate threshold, ...): one sentence each,
    # logged by the runner and tagged on the run, never a reason to fail the cell.
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        required = {"n_examples"} if self.descriptive else {"p_value", "statistic", "n_examples", "flag"}
        missing = required - set(self.metrics)
        if missing:
            raise ValueError(f"detector result lacks required metrics {sorted(missing)}")
