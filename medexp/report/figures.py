"""Figures of the controlled audit, drawn from tracked runs (matplotlib ``Figure``, no pyplot).

Each figure is drawn only when the runs it needs exist:

* Fig. 1: exchangeability p-values over benchmark x model, one heatmap per exch / exch_rank
  family under the release order (control ``none``); an asterisk and a red outline mark p < 0.01.
* Fig. 2: image-NN flag rate per benchmark and detector (backbone, corpus); a negative control
  is labelled by its image set; the dashed line is the nominal rate alpha.
* Fig. 3: the alpha sweep, flag rate against alpha, from the runs' ``alpha_sweep`` tables.
* Fig. 5: top-K Jaccard heatmaps per benchmark and control, from topk_jaccard ``per_pair`` tables.
* Fig. 7: the confound simulation, (a) Pr[Delta > 100] per synthetic model, (b) the clean
  probe's false-positive flag probability against the number of low-gain outliers.
* Replicates: per detector and control, the flag rate over independently trained clean and
  leaky models with Wilson intervals (medexp.report.replicates).
* The detector atlas: per detector, the flag rate against the leak dose over replicates
  (medexp.report.dose_response), when a recipe was run at two doses or more.
* MedVIGIL, per benchmark and detector: every model's MCS components, its silent-failure rate by
  risk tier and its blur decay curves (medexp.detectors.medvigil_figures), errors counted as wrong.

Replicate cells (a seed in their model or corpus name) are left out of Figs. 2, 3 and 5, which
show one cell per bar, line or matrix entry; the replicate figure summarises them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from medexp.report.cells import CellIndex, CellRun
from medexp.report.dose_response import dose_curves, dose_response_figure
from medexp.report.replicates import ReplicateRow, replicate_rows, replicate_seed

SIGNIFICANT = 0.01  # Fig. 1 marks cells with p below this (the audit's threshold)
EXCHANGEABILITY_HEATMAP = "exchangeability heatmap"  # a figure a detector declares its cells feed (report_figures)
FLAG_PROBABILITY = re.compile(r"^false_positive_flag_prob_(\d+)$")


@dataclass(frozen=True)
class ReportFigure:
    name: str  # file stem under figures/
    caption: str
    figure: Any  # matplotlib.figure.Figure


def draw_figures(index: CellIndex, tables: Mapping[str, Mapping[str, Any]]) -> list[ReportFigure]:
    """Every figure whose runs exist, in the paper's order."""
    drawn = [
        *exchangeability_heatmaps(index),
        image_flag_rates(index),
        alpha_sweeps(index, tables.get("alpha_sweep", {})),
        jaccard_heatmaps(index, tables.get("per_pair", {})),
        confound_panels(index),
        replicate_flag_rates(replicate_rows(index)),
        dose_response(index),
        *medvigil_panels(index),
    ]
    return [figure for figure in drawn if figure is not None]


def exchangeability_heatmaps(index: CellIndex) -> list[ReportFigure]:
    figures = []
    from medexp.detectors import declarations

    for detector_family in [declaration.name for declaration in declarations()
                            if EXCHANGEABILITY_HEATMAP in declaration.report_figures]:
        family = f"{detector_family}/none"
        cells = [cell for cell in index.finished if cell.family == family and "p_value" in cell.values]
        if not cells:
            continue
        benches, models = _ordered(cell.bench for cell in cells), _ordered(cell.model for cell in cells)
        p = np.full((len(benches), len(models)), np.nan)
        for cell in cells:
            p[benches.index(cell.bench), models.index(cell.model)] = cell.values["p_value"]
        figure = _figure(1.3 * len(models) + 3.0, 0.8 * len(benches) + 2.0)
        axes = figure.subplots()
        strength = -np.log10(np.clip(p, 1e-12, 1.0))
        image = axes.imshow(np.ma.masked_invalid(strength), cmap="Blues", vmin=0.0,
                            vmax=max(3.0, float(np.nanmax(strength))), aspect="auto")
        for (row, column), value in np.ndenumerate(p):
            if math.isnan(value):
                continue
            mark = value < SIGNIFICANT
            axes.text(column, row, f"{value:.2g}{' *' if mark else ''}", ha="center", va="center", fontsize=9,
                      color="white" if strength[row, column] > 0.6 * image.get_clim()[1] else "black",
                      fontweight="bold" if mark else "normal")
            if mark:
                axes.add_patch(_outline(column, row))
        _label_grid(axes, models, benches)
        figure.colorbar(image, ax=axes, label="-log10 p")
        axes.set_title(f"{detector_family} p-values, release order (* p < {SIGNIFICANT:g})", fontsize=10)
        figures.append(ReportFigure(
            f"fig1_exchangeability_{detector_family}",
            f"Fig. 1 ({detector_family}): exchangeability p-values over benchmark x model under the release "
            f"order; darker is smaller, * and a red outline mark p < {SIGNIFICANT:g}.",
            figure,
        ))
    return figures


def image_flag_rates(index: CellIndex) -> ReportFigure | None:
    cells = _image_nn_cells(index)
    if not cells:
        return None
    labels, detectors = _ordered(_image_label(cell) for cell in cells), _ordered(cell.detector for cell in cells)
    width = 0.8 / len(detectors)
    figure = _figure(max(5.0, 1.4 * len(labels) + 2.0), 3.8)
    axes = figure.subplots()
    for offset, detector in enumerate(detectors):
        for cell in (cell for cell in cells if cell.detector == detector):
            x = labels.index(_image_label(cell)) + (offset - (len(detectors) - 1) / 2) * width
            rate = cell.values["image_flag_rate"]
            axes.bar(x, 100 * rate, width, color=f"C{offset}", label=detector)
            flagged, total = cell.values.get("n_images_flagged"), cell.values.get("n_images")
            if flagged is not None and total:
                axes.annotate(f"{int(flagged)}/{int(total)}", (x, 100 * rate), ha="center", va="bottom", fontsize=7)
    axes.axhline(100 * cells[0].values["tau_alpha"], color="black", linestyle="--", linewidth=0.8,
                 label=f"nominal alpha = {cells[0].values['tau_alpha']:g}")
    axes.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    axes.set_ylabel("images flagged (%)")
    _dedupe_legend(axes)
    axes.set_title("image near-neighbour flag rate per benchmark and backbone", fontsize=10)
    return ReportFigure("fig2_image_nn_flag_rates",
                        "Fig. 2: share of images flagged by image_nn per benchmark and backbone; negative "
                        "controls are labelled by their image set; dashed: the nominal alpha.", figure)


def alpha_sweeps(index: CellIndex, sweeps: Mapping[str, Any]) -> ReportFigure | None:
    cells = [cell for cell in _image_nn_cells(index) if cell.run_id in sweeps]
    if not cells:
        return None
    labels, detectors = _ordered(_image_label(cell) for cell in cells), _ordered(cell.detector for cell in cells)
    figure = _figure(6.5, 4.2)
    axes = figure.subplots()
    styles = ("-", "--", ":", "-.")
    for cell in cells:
        sweep = sweeps[cell.run_id].sort_values("alpha")
        axes.plot(sweep["alpha"], sweep["flag_rate"], marker="o", markersize=3,
                  color=f"C{labels.index(_image_label(cell)) % 10}",
                  linestyle=styles[detectors.index(cell.detector) % len(styles)],
                  label=f"{_image_label(cell)}, {cell.detector}")
    axes.axvline(cells[0].values["tau_alpha"], color="black", linestyle=":", linewidth=0.8)
    axes.set_xscale("log")
    axes.set_yscale("symlog", linthresh=1e-3)  # zero flag rates stay visible
    axes.set_ylim(bottom=0.0)
    axes.set(xlabel="alpha (tau = alpha-quantile of corpus NN distances)", ylabel="share of images flagged")
    axes.legend(fontsize=7)
    axes.set_title("threshold sensitivity of image_nn", fontsize=10)
    return ReportFigure("fig3_alpha_sweep",
                        "Fig. 3: image_nn flag rate against the threshold level alpha, per benchmark (colour) "
                        "and backbone (line style); dotted: the alpha of the cells.", figure)


def jaccard_heatmaps(index: CellIndex, pair_tables: Mapping[str, Any]) -> ReportFigure | None:
    panels: dict[tuple[str, str], dict[frozenset, Any]] = {}
    for cell in index.finished:
        if cell.run_id not in pair_tables or replicate_seed(cell) is not None:
            continue
        pairs = panels.setdefault((cell.bench, cell.control), {})
        for row in pair_tables[cell.run_id].itertuples():
            pairs.setdefault(frozenset((row.model_a, row.model_b)), row)  # every run of a cohort lists its pairs
    if not panels:
        return None
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    sizes = [len({model for pair in pairs for model in pair}) for pairs in panels.values()]
    side = 1.0 * max(sizes) + 2.0
    figure = _figure(side * columns, side * rows)
    grid = figure.subplots(rows, columns, squeeze=False).ravel()
    for axes, ((bench, control), pairs) in zip(grid, sorted(panels.items())):
        models = sorted({model for pair in pairs for model in pair})
        jaccard = np.eye(len(models))
        for row in pairs.values():
            a, b = models.index(row.model_a), models.index(row.model_b)
            jaccard[a, b] = jaccard[b, a] = row.jaccard
            for i, j in ((a, b), (b, a)):
                axes.text(j, i, f"{row.intersection}/{row.k}", ha="center", va="center", fontsize=7,
                          color="black" if row.jaccard > 0.5 else "white")
        image = axes.imshow(jaccard, vmin=0.0, vmax=1.0, cmap="viridis")
        _label_grid(axes, models, models)
        axes.set_title(f"{bench}, control {control}", fontsize=9)
    for axes in grid[len(panels):]:
        axes.set_axis_off()
    figure.colorbar(image, ax=list(grid[: len(panels)]), label="Jaccard of top-K sets")
    return ReportFigure("fig5_topk_jaccard",
                        "Fig. 5: pairwise Jaccard of the models' top-K example sets per benchmark and control "
                        "(cell text: intersection/K).", figure)


def confound_panels(index: CellIndex) -> ReportFigure | None:
    tails = [cell for cell in index.finished
             if cell.params.get("control.kind") == "synthetic" and "pr_delta_gt_100" in cell.values]
    sweeps = [cell for cell in index.finished if any(FLAG_PROBABILITY.match(name) for name in cell.values)]
    if not tails and not sweeps:
        return None
    n_panels = int(bool(tails)) + int(bool(sweeps))
    figure = _figure(5.0 * n_panels, 3.8)
    panels = iter(figure.subplots(1, n_panels, squeeze=False)[0])
    if tails:
        axes = next(panels)
        for position, cell in enumerate(tails):
            gain = cell.params.get(f"control.cohort.{cell.model}.gain")
            axes.bar(position, 100 * cell.values["pr_delta_gt_100"],
                     color="tab:red" if cell.values.get("flag") == 1 else "tab:gray")
            if gain is not None:
                axes.annotate(f"g = {gain}", (position, 100 * cell.values["pr_delta_gt_100"]), ha="center",
                              va="bottom", fontsize=7)
        fraction = tails[0].params.get("detector.flag_fraction")
        if fraction is not None:
            axes.axhline(100 * float(fraction), color="black", linestyle="--", linewidth=0.8, label="flag fraction")
            axes.legend(fontsize=7)
        axes.set_xticks(range(len(tails)), [cell.model for cell in tails], rotation=20, ha="right", fontsize=8)
        axes.set(ylabel="Pr[Delta > 100] (%)", title="(a) tail enrichment per model (red: flagged)")
    if sweeps:
        axes = next(panels)
        for cell in sweeps:
            points = sorted((int(FLAG_PROBABILITY.match(name).group(1)), value)
                            for name, value in cell.values.items() if FLAG_PROBABILITY.match(name))
            axes.plot(*zip(*points), marker="o", label=cell.model)
            axes.set_xticks([k for k, _ in points])
        axes.set(xlabel="low-gain outliers in the cohort", ylabel="false-positive flag probability",
                 ylim=(-0.05, 1.05), title="(b) clean probe vs cohort composition")
        axes.legend(fontsize=7)
    return ReportFigure("fig7_confound",
                        "Fig. 7: the calibration confound without contamination: (a) Pr[Delta > 100] per synthetic "
                        "cohort model; (b) how often a clean probe is flagged as low-gain outliers join the cohort.",
                        figure)


def replicate_flag_rates(rows: list[ReplicateRow]) -> ReportFigure | None:
    """Flag rate with its Wilson interval per detector and control, clean and leaky models side by side;
    a second panel for the Bonferroni-significant rate when the runs give it."""
    if not rows:
        return None
    benches = _ordered(row.bench for row in rows)
    label = (lambda row: f"{row.detector}\n{row.control}") if len(benches) == 1 else \
        (lambda row: f"{row.bench}: {row.detector}\n{row.control}")
    groups = list(dict.fromkeys(label(row) for row in rows))
    series = list(dict.fromkeys((row.role, row.models, row.dose) for row in rows))
    panels = [("flagged", "flag == 1", lambda row: row.flagged)]
    if any(row.significant is not None for row in rows):
        panels.append(("significant", "p_bonferroni < alpha", lambda row: row.significant))
    figure = _figure(max(6.0, 0.7 * len(groups) + 2.5), 3.4 * len(panels))
    width = 0.7 / len(series)
    alphas = {row.alpha for row in rows if row.alpha is not None}
    alpha = alphas.pop() if len(alphas) == 1 else None  # one reference line when the detectors share it
    for axes, (title, rule, rate_of) in zip(figure.subplots(len(panels), 1, squeeze=False)[:, 0], panels):
        for position, (role, models, dose) in enumerate(series):
            colour = "tab:blue" if role == "clean" else ("tab:red" if role == "leaky" else "tab:gray")
            points = [(groups.index(label(row)), rate_of(row)) for row in rows
                      if (row.role, row.models, row.dose) == (role, models, dose) and rate_of(row) is not None]
            if not points:
                continue
            x = np.array([group for group, _ in points]) + (position - (len(series) - 1) / 2) * width
            rates = np.array([rate.rate for _, rate in points])
            errors = np.clip([[rate.rate - rate.low for _, rate in points], [rate.high - rate.rate for _, rate in points]],
                             0.0, None)  # rounding must not make an error bar negative
            dose_text = "" if math.isnan(dose) else f", dose {dose:g}"
            axes.errorbar(x, rates, yerr=errors, fmt="o" if role != "leaky" else "s", color=colour, capsize=3,
                          markersize=4, label=f"{models} ({role or 'replicates'}{dose_text})")
        if alpha is not None:
            axes.axhline(alpha, color="black", linestyle=":", linewidth=0.8, label=f"alpha = {alpha:g}")
        axes.set_xticks(range(len(groups)), groups, fontsize=7)
        axes.set(ylim=(-0.03, 1.03), ylabel=f"share {title}")
        axes.set_title(f"{rule} over replicates (Wilson 95% intervals)", fontsize=10)
        axes.legend(fontsize=7)
    return ReportFigure("replicate_flag_rates",
                        "Replicates: per detector and control, the share of independently trained clean models "
                        "(false-positive rate) and leaky models (power) that are flagged, with Wilson 95% "
                        "intervals; dotted: the detectors' alpha.", figure)


def dose_response(index: CellIndex) -> ReportFigure | None:
    """The detector atlas: flag rate against the leak dose, one panel per detector (and control)."""
    figure = dose_response_figure(dose_curves(index, replicate_rows(index)))
    if figure is None:
        return None
    return ReportFigure("dose_response",
                        "Detector atlas: per detector, the share of independently trained models flagged at each "
                        "leak dose (filled: the detector's flag; open: p_bonferroni below alpha over the seed's "
                        "family), Wilson 95% intervals over the replicates; blue: dose 0, the false-positive rate; "
                        "red: the power at that dose; dotted: the detector's alpha.", figure)


def medvigil_panels(index: CellIndex) -> list[ReportFigure]:
    """The MedVIGIL figures of every benchmark and MedVIGIL detector with tracked cells, one row
    (or curve) per model, errors counted as wrong (the cells' own figures show both conventions)."""
    from medexp.detectors.medvigil_metrics import ERRORS_WRONG
    from medexp.detectors.medvigil_figures import medvigil_figures

    groups: dict[tuple[str, str], dict[str, Mapping[str, float]]] = {}
    for cell in index.finished:
        if f"mcs_{ERRORS_WRONG}" in cell.values:
            groups.setdefault((cell.bench, cell.detector), {})[cell.model] = cell.values
    captions = {
        "mcs_components": "MedVIGIL: Capability, Safety, Grounding and their harmonic mean MCS per model "
                          "(case-clustered 95% interval of MCS)",
        "tier_sfr": "MedVIGIL: silent-failure rate per risk tier and weighted (SFR_w) per model",
        "blur_decay": "MedVIGIL: accuracy against blur sigma per model (image-required cases solid, "
                      "text-answerable dashed, no image at the right, L* dotted)",
    }
    figures = []
    for (bench, detector), metrics in sorted(groups.items()):
        drawn = medvigil_figures(metrics, f"{bench}, {detector}", (ERRORS_WRONG,))
        figures += [ReportFigure(f"medvigil_{bench}_{detector}_{name}", f"{captions[name]}; {bench}, {detector}.",
                                 figure) for name, figure in drawn.items()]
    return figures


def _image_nn_cells(index: CellIndex) -> list[CellRun]:
    return [cell for cell in index.finished
            if "image_flag_rate" in cell.values and "tau_alpha" in cell.values and replicate_seed(cell) is None]


def _image_label(cell: CellRun) -> str:
    """The benchmark, or for a negative control the image set that replaced its images."""
    if cell.params.get("control.kind") == "negative_images":
        return f"{cell.params.get('control.images.name', cell.control)} (negative control)"
    return cell.bench if cell.control == "none" else f"{cell.bench} ({cell.control})"


def _ordered(values) -> list[str]:
    return sorted(set(values))


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _outline(column: int, row: int):
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=2)


def _label_grid(axes, columns: list[str], rows: list[str]) -> None:
    axes.set_xticks(range(len(columns)), columns, rotation=30, ha="right", fontsize=8)
    axes.set_yticks(range(len(rows)), rows, fontsize=8)


def _dedupe_legend(axes) -> None:
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    axes.legend(unique.values(), unique.keys(), fontsize=7)
