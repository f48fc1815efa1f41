"""The replicate table: how often a detector flags independently trained clean and leaky models.

A cell is a *replicate* when it reruns another cell's recipe with only a seed changed and its
name says so: its model name ends in ``_s<seed>`` with ``<seed>`` the run's ``model.demo.seed``
(``conf/model/demo_*_replicate.yaml``), or, for the image detector, its detector name ends in
``_s<seed>`` with ``<seed>`` its corpus generator seed (``conf/corpus/demo_replicate.yaml``).

Model replicates whose names differ only in that suffix, on the same benchmark, detector and
control, at the same dose (``model.demo.leak_epochs``), form one row of the table: the number
of replicates n, how many the detector flags (its own ``flag`` metric: each detector's
documented decision rule at its alpha) and how many are significant after the report's family
correction (``p_bonferroni`` < the detector's ``alpha``), each as a rate with a Wilson 95%
interval. The resampling unit is the replicate, an independently trained model: the interval
covers the variation between training runs, everything else (benchmark, cohort, detector
settings) being the same in every replicate. Clean rows (dose 0) give the false-positive rate
of the whole pipeline, training included; leaky rows its power at that dose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from medexp.report.cells import CellIndex, CellRun

SEED_PARAM = "model.demo.seed"
DOSE_PARAM = "model.demo.leak_epochs"
ALPHA_PARAM = "detector.alpha"
CORPUS_SEED_PARAM = "detector.corpus.source.demo_corpus.seed"
CONFIDENCE = 0.95
UNIT = "an independently trained model (training seed model.demo.seed)"
COLUMNS = ("bench", "detector", "control", "models", "role", "dose", "replicates", "seeds",
           "flagged", "flag_rate", "flag_ci_low", "flag_ci_high",
           "alpha", "significant", "significant_rate", "significant_ci_low", "significant_ci_high", "resampling_unit")


@dataclass(frozen=True)
class Rate:
    """``count`` of ``n`` replicates, with the Wilson interval of the rate."""

    count: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.count / self.n

    @classmethod
    def of(cls, count: int, n: int) -> "Rate":
        return cls(count, n, *wilson_interval(count, n))


@dataclass(frozen=True)
class ReplicateRow:
    bench: str
    detector: str
    control: str
    models: str  # the replicates' model name without the seed suffix (demo_clean, demo_leaky_e30)
    dose: float  # model.demo.leak_epochs; NaN when the runs do not record it
    seeds: tuple[int, ...]
    flagged: Rate  # the detector's flag == 1
    alpha: float | None  # the detector's alpha (shared by the row's runs), None when they differ or lack it
    significant: Rate | None  # p_bonferroni < alpha; None when a run lacks either

    @property
    def role(self) -> str:
        """clean (the row is a false-positive rate), leaky (a power), or "" without a recorded dose."""
        if math.isnan(self.dose):
            return ""
        return "clean" if self.dose == 0 else "leaky"


def wilson_interval(count: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of ``count`` successes in ``n`` trials (SciPy)."""
    from scipy.stats import binomtest

    interval = binomtest(count, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def replicate_seed(cell: CellRun) -> int | None:
    """The seed of a replicate cell (model or corpus replicate), None for any other cell."""
    for axis, param in (("model", SEED_PARAM), ("detector", CORPUS_SEED_PARAM)):
        seed = cell.params.get(param)
        if seed is not None and cell.axis(axis).endswith(f"_s{seed}"):
            return int(seed)
    return None


def replicate_models(cell: CellRun) -> str | None:
    """A model replicate's model name without its seed suffix (demo_leaky_e30 for
    demo_leaky_e30_s13), the name its replicates share; None for any other cell."""
    seed = cell.params.get(SEED_PARAM)
    if seed is None or not cell.model.endswith(f"_s{seed}"):
        return None
    return cell.model.removesuffix(f"_s{seed}")


def replicate_rows(index: CellIndex) -> list[ReplicateRow]:
    """One row per group of finished model replicates that log a ``flag``, in a stable order."""
    groups: dict[tuple, list[CellRun]] = {}
    for cell in index.finished:
        models = replicate_models(cell)
        if models is None or not math.isfinite(cell.values.get("flag", math.nan)):
            continue
        groups.setdefault((cell.bench, cell.detector, cell.control, models, cell.params.get(DOSE_PARAM)),
                          []).append(cell)
    rows = [_row(key, cells) for key, cells in groups.items()]
    return sorted(rows, key=lambda row: (row.bench, row.detector, row.control,
                                         row.dose if math.isfinite(row.dose) else math.inf, row.models))


def _row(key: tuple, cells: list[CellRun]) -> ReplicateRow:
    bench, detector, control, models, dose = key
    dose = _number(dose)
    flagged = sum(cell.values["flag"] == 1 for cell in cells)
    alphas = {_number(cell.params.get(ALPHA_PARAM)) for cell in cells}
    alpha = alphas.pop() if len(alphas) == 1 else math.nan
    p_values = [cell.values.get("p_bonferroni", math.nan) for cell in cells]
    significant = None
    if math.isfinite(alpha) and all(math.isfinite(p) for p in p_values):
        significant = Rate.of(sum(p < alpha for p in p_values), len(cells))
    seeds = tuple(sorted(int(cell.params[SEED_PARAM]) for cell in cells))
    return ReplicateRow(bench, detector, control, models, dose, seeds, Rate.of(flagged, len(cells)),
                        alpha if math.isfinite(alpha) else None, significant)


def replicate_frame(rows: Sequence[ReplicateRow]):
    """The table as a DataFrame (replicates.csv): one row per replicate group."""
    import pandas as pd

    records = []
    for row in rows:
        significant = row.significant
        records.append({
            "bench": row.bench, "detector": row.detector, "control": row.control, "models": row.models,
            "role": row.role, "dose": row.dose, "replicates": row.flagged.n, "seeds": " ".join(map(str, row.seeds)),
            "flagged": row.flagged.count, "flag_rate": row.flagged.rate, "flag_ci_low": row.flagged.low,
            "flag_ci_high": row.flagged.high, "alpha": math.nan if row.alpha is None else row.alpha,
            "significant": pd.NA if significant is None else significant.count,
            "significant_rate": math.nan if significant is None else significant.rate,
            "significant_ci_low": math.nan if significant is None else significant.low,
            "significant_ci_high": math.nan if significant is None else significant.high,
            "resampling_unit": UNIT,
        })
    return pd.DataFrame(records, columns=list(COLUMNS)).astype({"significant": "Int64"})


def seed_ranges(seeds: Sequence[int]) -> str:
    """E.g. (10, 11, 12, 15) -> "10-12, 15"."""
    parts: list[str] = []
    start = previous = None
    for seed in sorted(seeds):
        if previous is not None and seed == previous + 1:
            previous = seed
            continue
        if start is not None:
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
        start = previous = seed
    if start is not None:
        parts.append(f"{start}" if start == previous else f"{start}-{previous}")
    return ", ".join(parts)


def _number(value) -> float:
    """A run parameter (a string) as a number; NaN when absent or not numeric."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
