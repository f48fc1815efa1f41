"""What every detector returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd


@dataclass
class DetectorResult:
    """Scalars (always p_value, statistic, n_examples, flag), a table and figures of one cell."""

    metrics: dict[str, float]
    table: Optional[pd.DataFrame] = None
    table_name: str = "per_example"
    figures: dict[str, Any] = field(default_factory=dict)  # file stem (may hold a folder) -> matplotlib Figure
    extra_tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # file stem -> further tables

    def __post_init__(self) -> None:
        missing = {"p_value", "statistic", "n_examples", "flag"} - set(self.metrics)
        if missing:
            raise ValueError(f"detector result lacks required metrics {sorted(missing)}")
