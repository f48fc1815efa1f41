"""The detector atlas view on hand-built tracked runs: curves join the doses of one recipe, the
multiple-choice recipe stays apart, the table and the figure show each dose's rate and interval."""

from __future__ import annotations

from medexp.report.cells import CellIndex
from medexp.report.document import to_markdown
from medexp.report.dose_response import dose_curves, dose_response_figure
from medexp.report.figures import draw_figures
from medexp.report.render import ReportContext, report_blocks
from medexp.report.replicates import replicate_rows, wilson_interval
from tests.report.tracked_cells import tracked_replicate

SEEDS = range(10, 15)


def atlas_runs():
    """loss on the text recipe at doses 0, 5, 30 (flagged 1, 2, 5 of 5 seeds); option_order on the
    multiple-choice recipe at 0 and 30 (0 and 4 of 5); exch on the text recipe at dose 30 only."""
    runs = []
    for position, seed in enumerate(SEEDS):
        for arm, dose, flagged in (("clean", 0, position < 1), ("leaky", 5, position < 2), ("leaky", 30, True)):
            runs.append(tracked_replicate(arm, seed, "loss", "none", {"p_value": 0.001 if flagged else 0.4,
                                                                       "flag": float(flagged)}, dose=dose))
        for arm, dose, flagged in (("clean", 0, False), ("leaky", 30, position < 4)):
            runs.append(tracked_replicate(arm, seed, "option_order", "none", {"p_value": 1e-5 if flagged else 0.3,
                                                                               "flag": float(flagged)},
                                          dose=dose, recipe="mc"))
        runs.append(tracked_replicate("leaky", seed, "exch", "none", {"p_value": 1e-6, "flag": 1.0}))
    return runs


def index():
    return CellIndex.from_runs(atlas_runs())


def test_a_curve_joins_the_doses_of_one_recipe_and_needs_two():
    cells = index()
    curves = dose_curves(cells, replicate_rows(cells))
    assert [(curve.detector, curve.recipe, curve.doses) for curve in curves] == [
        ("loss", "demo_clean", (0.0, 5.0, 30.0)), ("option_order", "demo_clean_mc", (0.0, 30.0))]
    loss = curves[0]
    assert loss.clean is loss.points[0]
    assert [(point.flagged.count, point.flagged.n) for point in loss.points] == [(1, 5), (2, 5), (5, 5)]
    assert (loss.points[1].flagged.low, loss.points[1].flagged.high) == wilson_interval(2, 5)


def test_recipes_that_differ_in_a_model_setting_stay_apart():
    # the same detector on both recipes: two curves, never one mixing their models
    runs = atlas_runs()
    for seed in SEEDS:
        runs.append(tracked_replicate("clean", seed, "option_order", "none", {"p_value": 0.5, "flag": 0.0}))
        runs.append(tracked_replicate("leaky", seed, "option_order", "none", {"p_value": 0.5, "flag": 0.0}, dose=30))
    cells = CellIndex.from_runs(runs)
    option_order = [curve for curve in dose_curves(cells, replicate_rows(cells)) if curve.detector == "option_order"]
    assert sorted(curve.recipe for curve in option_order) == ["demo_clean", "demo_clean_mc"]
    assert all(len(curve.points) == 2 for curve in option_order)


def test_the_report_has_the_atlas_table_and_figure():
    cells = index()
    rows = replicate_rows(cells)
    figures = draw_figures(cells, {})
    atlas = [figure for figure in figures if figure.name == "dose_response"]
    assert len(atlas) == 1
    axes = [axes for axes in atlas[0].figure.axes if axes.get_visible()]
    assert [axes.get_title() for axes in axes] == ["loss", "option_order"]
    context = ReportContext("atlas", "sqlite:///x.db", "run0", "2026-11-26T10:00:00")
    text = to_markdown(report_blocks([], cells, figures, context, {figure.name: f"figures/{figure.name}.png" for figure in figures},
                                     ["cells.csv"], rows, "replicates.csv"))
    assert "## Dose response" in text
    low, high = wilson_interval(2, 5)
    assert f"2/5 = 0.40 \\[{low:.2f}, {high:.2f}\\]" in text  # Markdown escapes the brackets
    table = text.split("## Dose response", 1)[1]
    header = next(line for line in table.splitlines() if line.startswith("| bench"))
    assert header.count("dose ") == 3  # 0, 5, 30: the union of the curves' doses
    option_order = next(line for line in table.splitlines() if "`option_order`" in line)
    assert "0/5 = 0.00" in option_order and "4/5 = 0.80" in option_order


def test_no_figure_without_two_doses():
    cells = CellIndex.from_runs([tracked_replicate("leaky", seed, "exch", "none", {"p_value": 1e-6, "flag": 1.0})
                                 for seed in SEEDS])
    assert dose_curves(cells, replicate_rows(cells)) == []
    assert dose_response_figure([]) is None
