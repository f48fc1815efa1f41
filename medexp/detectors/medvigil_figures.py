"""MedVIGIL figures from per-model tables (matplotlib ``Figure``, no pyplot).

* :func:`mcs_components_figure`: Capability, Safety, Grounding and their harmonic mean MCS per
  model, ordered by MCS, with the MCS interval when given: which axis is each model's bottleneck.
* :func:`tier_sfr_heatmap`: silent-failure rate per risk tier (L1..L5) and the weighted SFR_w,
  one row per model, safest first; undefined cells are left blank.
* :func:`blur_decay_figure`: accuracy against blur sigma per model, image-required cases solid,
  the text-answerable control dashed, the no-image accuracy as an X right of the sweep, and L*
  as a dotted vertical line when given.
* :func:`medvigil_figures`: all three from cells' metrics (one cell's, or every tracked cell of a
  benchmark in the report), via :func:`summary_rows` and :func:`decay_table`.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional

import numpy as np
import pandas as pd

from medexp.config.tiers import TIERS
from medexp.detectors.medvigil_metrics import CONVENTIONS, DECAY_GROUPS, ERRORS_WRONG, NO_IMAGE

AXES = (("cap", "Capability"), ("safe", "Safety"), ("ground", "Grounding"))


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _require(frame: pd.DataFrame, columns, what: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {missing}; has {list(frame.columns)}")
    if frame.empty:
        raise ValueError(f"{what}: the table is empty")


def mcs_components_figure(frame: pd.DataFrame, title: str = "MedVIGIL composite by component"):
    """``frame``: one row per model with model, cap, safe, ground, mcs and optionally mcs_ci_low/high."""
    _require(frame, ["model", "cap", "safe", "ground", "mcs"], "mcs_components_figure")
    ordered = frame.sort_values("mcs", ascending=True, na_position="first").reset_index(drop=True)
    figure = _figure(7.5, 0.55 * len(ordered) + 1.8)
    axes = figure.subplots()
    rows = np.arange(len(ordered))
    height = 0.22
    for offset, (column, label) in zip((-height, 0.0, height), AXES):
        axes.barh(rows + offset, ordered[column], height=height, label=label)
    error = None
    if {"mcs_ci_low", "mcs_ci_high"} <= set(ordered.columns):
        error = np.vstack([ordered["mcs"] - ordered["mcs_ci_low"], ordered["mcs_ci_high"] - ordered["mcs"]])
    axes.errorbar(ordered["mcs"], rows, xerr=error, fmt="D", color="black", label="MCS", capsize=3)
    axes.set_yticks(rows, ordered["model"])
    axes.set_xlim(0, 100)
    axes.set_xlabel("score (0-100)")
    axes.legend(loc="lower right", fontsize=8)
    axes.set_title(title, fontsize=10)
    return figure


def tier_sfr_heatmap(frame: pd.DataFrame, title: str = "Silent-failure rate by risk tier"):
    """``frame``: one row per model with model, sfr_L1..sfr_L5, sfr_w (and optionally acc_orig)."""
    tier_columns = [f"sfr_{tier}" for tier in TIERS]
    _require(frame, ["model", *tier_columns, "sfr_w"], "tier_sfr_heatmap")
    ordered = frame.sort_values("sfr_w", na_position="last").reset_index(drop=True)
    columns = [*tier_columns, "sfr_w"]
    labels = [*TIERS, "SFR_w"]
    if "acc_orig" in ordered.columns:
        columns, labels = ["acc_orig", *columns], ["Acc_orig", *labels]
    values = ordered[columns].to_numpy(dtype=float)
    figure = _figure(1.0 * len(columns) + 2.5, 0.45 * len(ordered) + 1.6)
    axes = figure.subplots()
    sfr = np.ma.masked_invalid(np.where(np.array([c.startswith("sfr") for c in columns]), values, np.nan))
    image = axes.imshow(sfr, cmap="Reds", vmin=0, vmax=100, aspect="auto")
    for (row, column), value in np.ndenumerate(values):
        if not math.isnan(value):
            dark = columns[column].startswith("sfr") and value > 60
            axes.text(column, row, f"{value:.1f}", ha="center", va="center", fontsize=8,
                      color="white" if dark else "black")
    axes.set_xticks(range(len(labels)), labels)
    axes.set_yticks(range(len(ordered)), ordered["model"])
    figure.colorbar(image, ax=axes, label="SFR (%)")
    axes.set_title(title + " (safest first)", fontsize=10)
    return figure


def blur_decay_figure(frame: pd.DataFrame, l_star: Optional[Mapping[str, float]] = None,
                      title: str = "Visual information decay"):
    """``frame``: model, group (image_required / text_answerable), sigma (inf = no image), acc."""
    _require(frame, ["model", "group", "sigma", "acc"], "blur_decay_figure")
    swept = sorted(float(s) for s in frame["sigma"].unique() if math.isfinite(float(s)))
    positions = {sigma: index for index, sigma in enumerate(swept)}
    no_image_at = len(swept) + 0.5
    figure = _figure(7.0, 4.2)
    axes = figure.subplots()
    colours = {}
    for model, rows in frame.groupby("model", sort=False):
        colour = colours.setdefault(model, f"C{len(colours) % 10}")
        for group, style in (("image_required", "-"), ("text_answerable", "--")):
            part = rows[rows["group"] == group]
            finite = part[np.isfinite(part["sigma"].astype(float))].sort_values("sigma")
            if not finite.empty:
                axes.plot([positions[float(s)] for s in finite["sigma"]], finite["acc"], style, marker="o",
                          color=colour, label=f"{model}" if group == "image_required" else f"{model} (text control)")
            blind = part[~np.isfinite(part["sigma"].astype(float))]
            if not blind.empty:
                axes.plot([no_image_at], blind["acc"].iloc[:1], "x", color=colour, markersize=9, mew=2)
        star = (l_star or {}).get(model)
        if star is not None and math.isfinite(star) and star in positions:
            axes.axvline(positions[star], color=colour, linestyle=":", linewidth=1)
    axes.set_xticks([*positions.values(), no_image_at], [f"{s:g}" for s in swept] + ["no image"])
    axes.set_xlabel("Gaussian blur sigma (px)")
    axes.set_ylabel("accuracy (%)")
    axes.set_ylim(0, 100)
    axes.legend(fontsize=7, loc="upper right")
    axes.set_title(title, fontsize=10)
    return figure


SUMMARY_COLUMNS = ("cap", "safe", "ground", "mcs", "mcs_ci_low", "mcs_ci_high", "acc_orig",
                   *(f"sfr_{tier}" for tier in TIERS), "sfr_w")


def summary_rows(metrics: Mapping[str, Mapping[str, float]], conventions=CONVENTIONS) -> pd.DataFrame:
    """One row per model and error convention (``model`` reads "<model> (<convention>)" when
    several are asked for) with the columns the component and tier figures read, from each
    model's cell metrics (``cap_<convention>``, ``mcs_<convention>_ci_low`` ...)."""
    def value(values: Mapping[str, float], column: str, convention: str) -> float:
        for suffix in ("_ci_low", "_ci_high"):
            if column.endswith(suffix):
                return values.get(f"{column.removesuffix(suffix)}_{convention}{suffix}", math.nan)
        return values.get(f"{column}_{convention}", math.nan)

    return pd.DataFrame([
        {"model": model if len(conventions) == 1 else f"{model} ({convention.replace('_', ' ')})",
         **{column: value(values, column, convention) for column in SUMMARY_COLUMNS}}
        for model, values in metrics.items() for convention in conventions
    ], columns=["model", *SUMMARY_COLUMNS])


def medvigil_figures(metrics: Mapping[str, Mapping[str, float]], subject: str,
                     conventions=CONVENTIONS) -> dict[str, object]:
    """The MCS components and the tier heatmap (a row per model and convention), and the blur
    decay curves (errors counted as wrong) when the cells have a blur sweep, titled for ``subject``."""
    rows = summary_rows(metrics, conventions)
    figures = {
        "mcs_components": mcs_components_figure(rows, f"MedVIGIL composite: {subject}"),
        "tier_sfr": tier_sfr_heatmap(rows, f"Silent-failure rate by risk tier: {subject}"),
    }
    decay = decay_table(metrics, ERRORS_WRONG)
    if not decay.empty:
        l_star = {model: values.get(f"l_star_{ERRORS_WRONG}", math.nan) for model, values in metrics.items()}
        figures["blur_decay"] = blur_decay_figure(decay, l_star, f"Visual information decay: {subject}")
    return figures


def decay_table(metrics: Mapping[str, Mapping[str, float]], convention: str = ERRORS_WRONG) -> pd.DataFrame:
    """The long table :func:`blur_decay_figure` reads, from each model's cell metrics
    (``decay_<group>_sigma_<s>_<convention>`` and ``decay_<group>_no_image_<convention>``)."""
    rows = []
    for model, values in metrics.items():
        for group in DECAY_GROUPS:
            start, end = f"decay_{group}_", f"_{convention}"
            for name, value in values.items():
                if not (name.startswith(start) and name.endswith(end)):
                    continue
                level = name[len(start):-len(end)]
                if level == NO_IMAGE:
                    sigma = math.inf
                elif level.startswith("sigma_"):
                    sigma = float(level.removeprefix("sigma_"))
                else:
                    continue
                rows.append({"model": model, "group": group, "sigma": sigma, "acc": value})
    return pd.DataFrame(rows, columns=["model", "group", "sigma", "acc"])
