"""The tracked cells a report rests on, with their multiple-testing corrections.

Per cell key the latest FINISHED run counts; a key with no finished run is kept aside with its
latest attempt (FAILED with its error, or still RUNNING) so a claim can say why it lacks
evidence. Per ``medexp.family`` tag, the finished cells that have a p-value form one test
family: the report adds ``p_bonferroni``, ``q_bh`` (Benjamini-Hochberg) and ``family_size`` to
their values, computed with :func:`medexp.stats.adjust_pvalues`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from medexp.report.claims import AXES, name_matches

log = logging.getLogger("medexp")

REPORT_VALUES = ("p_bonferroni", "q_bh", "family_size")
# An answering cell's verdict counts (the judge stage's ``n_verdict.<verdict>`` metrics), so a reader
# sees beside each p-value how many replies were right, wrong, no answer, or failed calls.
VERDICTS = ("correct", "wrong", "no_answer", "error")
VERDICT_COLUMNS = tuple(f"n_{verdict}" for verdict in VERDICTS)
TABLE_COLUMNS = ("cell_key", *AXES, "family", "status", "run_id", "p_value", *REPORT_VALUES, "flag", "judge",
                 *VERDICT_COLUMNS, "error")


@dataclass(frozen=True)
class CellRun:
    """One tracked run of a cell, with the values a claim condition may read."""

    key: str
    model: str
    bench: str
    detector: str
    control: str
    family: str | None
    run_id: str
    status: str
    start_time: int
    values: Mapping[str, float]  # the run's metrics, then the report's values (p_bonferroni, ...)
    params: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None  # the recorded error of a FAILED run
    judge: str | None = None  # the judge of an answering cell (its ``medexp.judge`` tag)

    def verdict_counts(self) -> dict[str, float]:
        """``n_<verdict>`` -> count, from the judge stage's metrics (NaN where the cell judged nothing)."""
        return {f"n_{verdict}": self.values.get(f"n_verdict.{verdict}", math.nan) for verdict in VERDICTS}

    def axis(self, name: str) -> str:
        return getattr(self, name)

    def matches(self, names: Mapping[str, str]) -> bool:
        """Whether every named axis equals its name or matches its glob pattern."""
        return all(name_matches(self.axis(axis), value) for axis, value in names.items())


@dataclass(frozen=True)
class CellIndex:
    finished: tuple[CellRun, ...]  # the latest FINISHED run of each cell key, sorted by key
    unfinished: tuple[CellRun, ...]  # the latest run of each key that never finished

    @classmethod
    def from_runs(cls, runs: Iterable, extra_values: Mapping[str, Mapping[str, float]] | None = None) -> "CellIndex":
        """Index :class:`~medexp.tracking.TrackedRun` objects; ``extra_values`` (run id -> names)
        adds values read from artefacts to a run's metrics."""
        extra_values = extra_values or {}
        latest_finished: dict[str, CellRun] = {}
        latest_any: dict[str, CellRun] = {}
        for run in runs:
            cell = _cell_run(run, extra_values.get(run.run_id, {}))
            if cell is None:
                continue
            _keep_latest(latest_any, cell)
            if cell.status == "FINISHED":
                _keep_latest(latest_finished, cell)
        unfinished = [cell for key, cell in latest_any.items() if key not in latest_finished]
        finished = _with_family_corrections(latest_finished.values())
        return cls(tuple(sorted(finished, key=lambda c: c.key)), tuple(sorted(unfinished, key=lambda c: c.key)))

    def select(self, names: Mapping[str, str]) -> list[CellRun]:
        """Finished cells whose axes match ``names`` (config names or glob patterns; axes not named
        match anything)."""
        return [cell for cell in self.finished if cell.matches(names)]

    def unfinished_matching(self, names: Mapping[str, str]) -> list[CellRun]:
        return [cell for cell in self.unfinished if cell.matches(names)]

    def frame(self):
        """The cells table: one row per cell key (finished first), raw and corrected p-values."""
        import pandas as pd

        rows = []
        for cell in (*self.finished, *self.unfinished):
            values = cell.values
            rows.append({
                "cell_key": cell.key, **{axis: cell.axis(axis) for axis in AXES}, "family": cell.family,
                "status": cell.status, "run_id": cell.run_id,
                **{name: values.get(name, math.nan) for name in ("p_value", *REPORT_VALUES, "flag")},
                "judge": cell.judge, **cell.verdict_counts(), "error": cell.error,
            })
        return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def _cell_run(run, extra: Mapping[str, float]) -> CellRun | None:
    tags = run.tags
    axes = {axis: tags.get(f"medexp.{axis}") for axis in AXES}
    if "medexp.cell_key" not in tags or None in axes.values():
        log.warning("run %s has no complete medexp cell tags; the report leaves it out", run.run_id)
        return None
    return CellRun(
        key=tags["medexp.cell_key"], **axes, family=tags.get("medexp.family"), run_id=run.run_id, status=run.status,
        start_time=run.start_time, values={**run.metrics, **extra}, params=dict(run.params),
        error=tags.get("medexp.error"), judge=tags.get("medexp.judge"),
    )


def _keep_latest(latest: dict[str, CellRun], cell: CellRun) -> None:
    if cell.key not in latest or cell.start_time > latest[cell.key].start_time:
        latest[cell.key] = cell


def _with_family_corrections(cells: Iterable[CellRun]) -> list[CellRun]:
    """Add p_bonferroni, q_bh and family_size to each finished cell with a p-value and a family."""
    import numpy as np

    from medexp.stats import adjust_pvalues

    cells = list(cells)
    families: dict[str, list[int]] = {}
    for position, cell in enumerate(cells):
        p = cell.values.get("p_value")
        if cell.family and p is not None and math.isfinite(p):
            families.setdefault(cell.family, []).append(position)
        elif cell.family and p is not None:
            log.warning("cell %s has a non-finite p_value; it is left out of family %s", cell.key, cell.family)
    corrected = list(cells)
    for members in families.values():
        p = np.array([cells[i].values["p_value"] for i in members])
        bonferroni, bh = adjust_pvalues(p, "bonferroni"), adjust_pvalues(p, "bh")
        for j, i in enumerate(members):
            added = {"p_bonferroni": float(bonferroni[j]), "q_bh": float(bh[j]), "family_size": float(len(members))}
            corrected[i] = replace(cells[i], values={**cells[i].values, **added})
    return corrected
