"""The tracked cells a report rests on, with their multiple-testing corrections.

A cell is its key and its settings (tag ``medexp.settings``, :mod:`medexp.runner.settings`: the
config beyond the key's four names that can change its result). Per key and settings the latest
FINISHED run counts, so a rerun replaces its earlier run while a run of the same key with other
settings stands beside it: the report shows such variants of one key side by side, each with the
params that differ between them (``differs``). A run tracked before settings were tagged counts
as an earlier run of its key's settings: it is left out once a run of the key carries the tag.
A key and settings with no finished run are kept aside with their latest attempt (FAILED with its
error, or still RUNNING) so a claim can say why it lacks evidence. Per ``medexp.family`` tag, the
finished cells that have a p-value form one test family (each settings of a key counts: each is a
test that was run): the report adds ``p_bonferroni``, ``q_bh`` (Benjamini-Hochberg) and
``family_size`` to their values, computed with :func:`medexp.stats.adjust_pvalues`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from medexp.config.schemas import RUN_NEUTRAL_KEYS
from medexp.report.claims import AXES, name_matches

log = logging.getLogger("medexp")

REPORT_VALUES = ("p_bonferroni", "q_bh", "family_size")
# An answering cell's verdict counts (the judge stage's ``n_verdict.<verdict>`` metrics), so a reader
# sees beside each p-value how many replies were right, wrong, no answer, or failed calls.
VERDICTS = ("correct", "wrong", "no_answer", "error")
VERDICT_COLUMNS = tuple(f"n_{verdict}" for verdict in VERDICTS)
TABLE_COLUMNS = ("cell_key", *AXES, "settings", "differs", "family", "status", "run_id", "p_value", *REPORT_VALUES,
                 "flag", "judge", *VERDICT_COLUMNS, "error")


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
    settings: str | None = None  # the digest of its settings (tag medexp.settings); None before runs carried it
    # where other finished runs of its key have other settings: the params whose values differ
    # between them, with this run's values ("" for a param it lacks); empty for a key run one way
    differs: Mapping[str, str] = field(default_factory=dict)

    @property
    def identity(self) -> tuple[str, str | None]:
        """Key and settings: runs with one identity computed the same thing, the latest stands for them."""
        return self.key, self.settings

    def verdict_counts(self) -> dict[str, float]:
        """``n_<verdict>`` -> count, from the judge stage's metrics (NaN where the cell judged nothing)."""
        return {f"n_{verdict}": self.values.get(f"n_verdict.{verdict}", math.nan) for verdict in VERDICTS}

    def describe_differences(self) -> str:
        """E.g. "detector.n_permutations=1000, seed=3"; "" for a key run one way."""
        return ", ".join(f"{name}={value}" for name, value in sorted(self.differs.items()))

    def axis(self, name: str) -> str:
        return getattr(self, name)

    def matches(self, names: Mapping[str, str]) -> bool:
        """Whether every named axis equals its name or matches its glob pattern."""
        return all(name_matches(self.axis(axis), value) for axis, value in names.items())


@dataclass(frozen=True)
class CellIndex:
    finished: tuple[CellRun, ...]  # the latest FINISHED run of each cell key and settings, sorted by key
    unfinished: tuple[CellRun, ...]  # the latest run of each key and settings that never finished

    @classmethod
    def from_runs(cls, runs: Iterable, extra_values: Mapping[str, Mapping[str, float]] | None = None) -> "CellIndex":
        """Index :class:`~medexp.tracking.TrackedRun` objects; ``extra_values`` (run id -> names)
        adds values read from artefacts to a run's metrics."""
        extra_values = extra_values or {}
        cells = [cell for cell in (_cell_run(run, extra_values.get(run.run_id, {})) for run in runs) if cell is not None]
        with_settings = {cell.key for cell in cells if cell.settings is not None}
        latest_finished: dict[tuple[str, str | None], CellRun] = {}
        latest_any: dict[tuple[str, str | None], CellRun] = {}
        for cell in cells:
            if cell.settings is None and cell.key in with_settings:
                continue  # tracked before settings were tagged: an earlier run of the key
            _keep_latest(latest_any, cell)
            if cell.status == "FINISHED":
                _keep_latest(latest_finished, cell)
        unfinished = [cell for identity, cell in latest_any.items() if identity not in latest_finished]
        finished = _with_family_corrections(_with_differences(latest_finished.values()))
        return cls(tuple(sorted(finished, key=_order)), tuple(sorted(unfinished, key=_order)))

    def select(self, names: Mapping[str, str]) -> list[CellRun]:
        """Finished cells whose axes match ``names`` (config names or glob patterns; axes not named
        match anything)."""
        return [cell for cell in self.finished if cell.matches(names)]

    def unfinished_matching(self, names: Mapping[str, str]) -> list[CellRun]:
        return [cell for cell in self.unfinished if cell.matches(names)]

    def frame(self):
        """The cells table: one row per cell key and settings (finished first), raw and corrected
        p-values; variants of one key in adjacent rows, ``differs`` naming what sets them apart."""
        import pandas as pd

        rows = []
        for cell in (*self.finished, *self.unfinished):
            values = cell.values
            rows.append({
                "cell_key": cell.key, **{axis: cell.axis(axis) for axis in AXES}, "settings": cell.settings,
                "differs": cell.describe_differences(), "family": cell.family,
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
        error=tags.get("medexp.error"), judge=tags.get("medexp.judge"), settings=tags.get("medexp.settings"),
    )


def _keep_latest(latest: dict[tuple[str, str | None], CellRun], cell: CellRun) -> None:
    if cell.identity not in latest or cell.start_time > latest[cell.identity].start_time:
        latest[cell.identity] = cell


def _order(cell: CellRun) -> tuple[str, int]:
    """By key, then the variants of a key oldest first: they sit side by side in every table."""
    return cell.key, cell.start_time


def _with_differences(cells: Iterable[CellRun]) -> list[CellRun]:
    """Each finished cell, with ``differs`` set where its key has finished runs of other settings:
    the params (the resolved config, flattened) whose values are not the same in all of them,
    leaving out the sections that change no result (paths, tracking, ...)."""
    cells = list(cells)
    variants: dict[str, list[CellRun]] = {}
    for cell in cells:
        variants.setdefault(cell.key, []).append(cell)
    out = []
    for cell in cells:
        others = variants[cell.key]
        names = {name for other in others for name in other.params
                 if name.split(".", 1)[0] not in RUN_NEUTRAL_KEYS}
        differing = sorted(name for name in names if len({other.params.get(name, "") for other in others}) > 1)
        out.append(replace(cell, differs={name: cell.params.get(name, "") for name in differing}) if differing else cell)
    return out


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
