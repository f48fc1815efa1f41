"""The detector atlas: each detector's flag rate against the leak dose, over replicates.

A *dose curve* joins the replicate rows (:mod:`medexp.report.replicates`) of one benchmark,
detector and control whose models share a training recipe and differ only in the dose
(``model.demo.leak_epochs``) and the training seed: the clean row (dose 0) is the detector's
false-positive rate, every other dose its power there, each a rate over independently trained
models with its Wilson interval. Two rows share a recipe when every model setting the runs
record (``model.*`` params) agrees except the name, the seed and the dose, so the text-side and
the multiple-choice demo recipes stay separate curves even where one detector reads both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from medexp.report.cells import CellIndex
from medexp.report.replicates import DOSE_PARAM, SEED_PARAM, ReplicateRow, replicate_models

NOT_RECIPE = {"model.name", SEED_PARAM, DOSE_PARAM}


@dataclass(frozen=True)
class DoseCurve:
    bench: str
    detector: str
    control: str
    recipe: str  # the models' name at dose 0 (the clean recipe), else at the lowest dose
    points: tuple[ReplicateRow, ...]  # one per dose, ascending

    @property
    def doses(self) -> tuple[float, ...]:
        return tuple(point.dose for point in self.points)

    @property
    def clean(self) -> ReplicateRow | None:
        """The dose-0 row, whose flag rate is the false-positive rate."""
        return self.points[0] if self.points[0].dose == 0 else None


def recipe_key(params) -> tuple[tuple[str, str], ...]:
    """The model settings a run records, less its name, seed and dose."""
    return tuple(sorted((key, value) for key, value in params.items()
                        if key.startswith("model.") and key not in NOT_RECIPE))


def dose_curves(index: CellIndex, rows: Sequence[ReplicateRow]) -> list[DoseCurve]:
    """The curves with at least two doses, in the rows' order (bench, detector, control)."""
    recipes = {}
    for cell in index.finished:
        models = replicate_models(cell)
        if models is not None:
            recipes.setdefault((models, cell.bench), recipe_key(cell.params))
    groups: dict[tuple, list[ReplicateRow]] = {}
    for row in rows:
        if math.isfinite(row.dose) and (row.models, row.bench) in recipes:
            groups.setdefault((row.bench, row.detector, row.control, recipes[row.models, row.bench]), []).append(row)
    curves = []
    for (bench, detector, control, _), points in groups.items():
        points.sort(key=lambda row: row.dose)
        if len({row.dose for row in points}) >= 2:
            curves.append(DoseCurve(bench, detector, control, points[0].models, tuple(points)))
    return curves


def dose_labels(curves: Sequence[DoseCurve]) -> list[float]:
    """Every dose any curve has, ascending: the atlas table's columns and the figure's x positions."""
    return sorted({dose for curve in curves for dose in curve.doses})


def dose_response_figure(curves: Sequence[DoseCurve]):
    """One panel per curve: flag rate (filled) and Bonferroni-significant rate (open) against the
    dose, equally spaced, with Wilson 95% intervals; the clean point blue, the leaky ones red; dotted:
    the detector's alpha. None without curves."""
    from matplotlib.figure import Figure

    if not curves:
        return None
    doses = dose_labels(curves)
    columns = min(4, len(curves))
    rows = math.ceil(len(curves) / columns)
    figure = Figure(figsize=(3.2 * columns, 2.6 * rows), layout="constrained")
    grid = figure.subplots(rows, columns, squeeze=False, sharex=True, sharey=True)
    for axes, curve in zip(grid.flat, curves):
        for offset, rate_of, filled in ((-0.09, lambda row: row.flagged, True),
                                        (0.09, lambda row: row.significant, False)):
            shown = [(doses.index(row.dose) + offset, row.dose, rate_of(row)) for row in curve.points
                     if rate_of(row) is not None]
            if not shown:
                continue
            axes.plot([x for x, _, _ in shown], [rate.rate for _, _, rate in shown], color="tab:gray",
                      linewidth=0.8, linestyle="-" if filled else "--")
            for x, dose, rate in shown:
                colour = "tab:blue" if dose == 0 else "tab:red"
                # rounding must not make an error bar negative
                error = [[max(rate.rate - rate.low, 0.0)], [max(rate.high - rate.rate, 0.0)]]
                axes.errorbar([x], [rate.rate], yerr=error, fmt="o", color=colour, capsize=2, markersize=4,
                              markerfacecolor=colour if filled else "white")
        alpha = curve.points[-1].alpha
        if alpha is not None:
            axes.axhline(alpha, color="black", linestyle=":", linewidth=0.8)
        axes.set_title(f"{curve.detector} ({curve.control})" if curve.control != "none" else curve.detector, fontsize=9)
        axes.set_ylim(-0.04, 1.04)
    from matplotlib.lines import Line2D

    figure.legend(handles=[Line2D([], [], marker="o", color="tab:blue", label="clean (dose 0): false positives"),
                           Line2D([], [], marker="o", color="tab:red", label="leaky: power"),
                           Line2D([], [], marker="o", color="tab:gray", label="the detector's flag"),
                           Line2D([], [], marker="o", color="tab:gray", markerfacecolor="white", linestyle="--",
                                  label="Bonferroni p < alpha (the seed's family)")],
                  loc="outside lower center", ncols=4, fontsize=8)
    for axes in grid.flat[len(curves):]:
        axes.set_visible(False)
    for axes in grid[-1, :]:
        axes.set_xticks(range(len(doses)), [f"{dose:g}" for dose in doses], fontsize=8)
        axes.set_xlabel("leak epochs (dose)", fontsize=8)
    for axes in grid[:, 0]:
        axes.set_ylabel("share flagged", fontsize=8)
    return figure
