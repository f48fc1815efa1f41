"""The replicate table on hand-built tracked runs: groups, counts and Wilson intervals by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from medexp.report.cells import CellIndex
from medexp.report.document import to_html, to_markdown
from medexp.report.figures import draw_figures, image_flag_rates, jaccard_heatmaps, replicate_flag_rates
from medexp.report.render import ReportContext, latex_replicate_table, report_blocks
from medexp.report.replicates import UNIT, replicate_frame, replicate_rows, replicate_seed, seed_ranges, wilson_interval
from tests.report.tracked_cells import tracked, tracked_replicate

Z = 1.959963984540054  # the 97.5% standard normal quantile


def wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    """(p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), p = k/n."""
    p = k / n
    centre = p + Z * Z / (2 * n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return (centre - half) / (1 + Z * Z / n), (centre + half) / (1 + Z * Z / n)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 10), (9, 10), (10, 10), (3, 7), (1, 1)])
def test_wilson_interval_equals_the_formula(k, n):
    assert wilson_interval(k, n) == pytest.approx(wilson_by_hand(k, n), abs=1e-12)


def test_wilson_interval_of_9_of_10_is_the_textbook_value():
    low, high = wilson_interval(9, 10)
    assert (round(low, 4), round(high, 4)) == (0.5958, 0.9821)


SEEDS = range(10, 20)


def replicate_runs():
    """exch (release order) for 10 clean and 10 leaky replicates, 3 leaky at dose 10, plus cells the
    table must leave out: demo_grid's own models, an image corpus replicate, a failed replicate."""
    runs = []
    for position, seed in enumerate(SEEDS):
        # leaky: 9 of 10 flagged at the raw alpha; p 0.004 is flagged but not Bonferroni-significant (x2)
        leaky_p = 1e-4 if position < 8 else (0.004 if position == 8 else 0.3)
        runs.append(tracked_replicate("leaky", seed, "exch", "none", {"p_value": leaky_p, "flag": float(leaky_p < 0.01)}))
        clean_p = 0.002 if position == 0 else 0.5
        runs.append(tracked_replicate("clean", seed, "exch", "none", {"p_value": clean_p, "flag": float(clean_p < 0.01)}))
    for seed in (10, 11, 12):
        runs.append(tracked_replicate("leaky", seed, "exch", "none", {"p_value": 0.2, "flag": 0.0}, dose=10,
                                      family=f"exch/none/replicate_s{seed}_dose10"))
    runs += [
        tracked("demo_clean", "demo", "exch", "none", {"p_value": 0.07, "flag": 0.0},
                params={"model.demo.seed": "0", "model.demo.leak_epochs": "0", "detector.alpha": "0.01"}),
        tracked("none", "demo", "image_nn-phash-demo_s10", "none",
                {"p_value": 1e-50, "flag": 1.0, "flag_rate": 0.25, "tau_alpha": 0.01},
                params={"detector.corpus.source.demo_corpus.seed": "10", "detector.alpha": "0.01"}),
        tracked_replicate("clean", 20, "exch", "none", {}, status="FAILED", error="RuntimeError: boom"),
    ]
    return runs


@pytest.fixture()
def rows():
    return replicate_rows(CellIndex.from_runs(replicate_runs()))


def test_replicate_cells_are_named_by_their_seed():
    cells = {cell.model if cell.model != "none" else cell.detector: cell
             for cell in CellIndex.from_runs(replicate_runs()).finished}
    assert replicate_seed(cells["demo_clean_s13"]) == 13 and replicate_seed(cells["demo_leaky_e10_s11"]) == 11
    assert replicate_seed(cells["image_nn-phash-demo_s10"]) == 10  # a corpus replicate
    assert replicate_seed(cells["demo_clean"]) is None  # seed 0, but its name does not carry it


def test_one_row_per_arm_and_dose_with_counts_and_wilson_intervals(rows):
    assert [(row.models, row.role, row.dose, row.seeds) for row in rows] == [
        ("demo_clean", "clean", 0.0, tuple(SEEDS)),
        ("demo_leaky_e10", "leaky", 10.0, (10, 11, 12)),
        ("demo_leaky_e30", "leaky", 30.0, tuple(SEEDS)),
    ]
    clean, low_dose, leaky = rows
    assert (clean.flagged.count, clean.flagged.n) == (1, 10)
    assert (clean.flagged.low, clean.flagged.high) == pytest.approx(wilson_by_hand(1, 10))
    assert (leaky.flagged.count, leaky.flagged.n, leaky.flagged.rate) == (9, 10, 0.9)
    assert (leaky.flagged.low, leaky.flagged.high) == pytest.approx(wilson_by_hand(9, 10))
    # significance after Bonferroni over each replicate's family of 2: 0.004 x 2 = 0.008 < 0.01 still;
    # the clean replicate's 0.002 x 2 too
    assert (leaky.significant.count, clean.significant.count, low_dose.significant.count) == (9, 1, 0)
    assert (low_dose.significant.low, low_dose.significant.high) == pytest.approx(wilson_by_hand(0, 3))
    assert {row.alpha for row in rows} == {0.01}
    assert {(row.bench, row.detector, row.control) for row in rows} == {("demo", "exch", "none")}


def test_significance_uses_the_family_correction():
    runs = [tracked_replicate("leaky", seed, "exch", "none", {"p_value": 0.004, "flag": 1.0}) for seed in SEEDS]
    runs += [tracked_replicate("clean", seed, "exch", "none", {"p_value": 0.5, "flag": 0.0}) for seed in SEEDS]
    # a third model in each family makes m = 3: 0.004 x 3 = 0.012, not significant at 0.01
    runs += [tracked(f"other_{seed}", "demo", "exch", "none", {"p_value": 0.9, "flag": 0.0},
                     family=f"exch/none/replicate_s{seed}") for seed in SEEDS]
    (_, leaky) = replicate_rows(CellIndex.from_runs(runs))
    assert (leaky.flagged.count, leaky.significant.count) == (10, 0)


def test_a_row_without_p_values_or_alpha_has_no_significance_column():
    runs = [tracked_replicate("clean", seed, "mink_tail", "none", {"flag": 0.0, "p_value": 0.5},
                              params={"detector.alpha": "0.01"}) for seed in (10, 11)]
    runs.append(tracked_replicate("clean", 12, "mink_tail", "none", {"flag": 1.0}))
    (row,) = replicate_rows(CellIndex.from_runs(runs))
    assert (row.flagged.count, row.flagged.n, row.significant) == (1, 3, None)


def test_the_csv_table_holds_one_row_per_group(rows, tmp_path):
    frame = replicate_frame(rows)
    frame.to_csv(tmp_path / "replicates.csv", index=False)
    table = pd.read_csv(tmp_path / "replicates.csv")
    leaky = table[table["models"] == "demo_leaky_e30"].iloc[0]
    assert (leaky["role"], leaky["dose"], leaky["replicates"], leaky["flagged"], leaky["significant"]) == \
        ("leaky", 30.0, 10, 9, 9)
    assert leaky["seeds"] == "10 11 12 13 14 15 16 17 18 19" and leaky["resampling_unit"] == UNIT
    assert (leaky["flag_ci_low"], leaky["flag_ci_high"]) == pytest.approx(wilson_by_hand(9, 10))
    assert list(table["models"]) == ["demo_clean", "demo_leaky_e10", "demo_leaky_e30"]


def test_the_report_renders_the_table_in_markdown_html_and_latex(rows, tmp_path):
    context = ReportContext("medexp", "sqlite:///x", "r1", "now")
    index = CellIndex.from_runs(replicate_runs())
    blocks = report_blocks([], index, [], context, {}, ["cells.csv"], rows, "replicates.csv")
    markdown = to_markdown(blocks)
    assert "## Replicates" in markdown and "[replicates.csv](replicates.csv)" in markdown
    # (Markdown escapes the brackets)
    assert ("| demo | `exch` | none | `demo_leaky_e30` | leaky | 30 | 10 (10-19) | 9/10 = 0.90 \\[0.60, 0.98\\] | 0.01 |"
            in markdown)
    assert "| `demo_clean` | clean | 0 | 10 (10-19) | 1/10 = 0.10 \\[0.02, 0.40\\] |" in markdown
    assert "one replicate is an independently trained model" in markdown
    html = to_html(blocks, "t", tmp_path)
    assert "<h2>Replicates</h2>" in html and "9/10 = 0.90 [0.60, 0.98]" in html
    latex = latex_replicate_table(rows, context)
    assert r"exch & none & demo\_leaky\_e30 & 30 & 10 & 9/10 = 0.90 [0.60, 0.98] & 9/10 = 0.90 [0.60, 0.98] \\" in latex
    assert r"\label{tab:replicates}" in latex and "Wilson 95\\% intervals" in latex
    assert latex_replicate_table([], context) == ""


def test_the_figure_draws_each_rate_with_its_interval(rows):
    figure = replicate_flag_rates(rows)
    flagged, significant = figure.figure.axes
    assert [tick.get_text() for tick in flagged.get_xticklabels()] == ["exch\nnone"]
    # one errorbar per (arm, dose): its point is the rate, its bar spans the Wilson interval
    drawn = {}
    for container in flagged.containers:
        point, _, (bar,) = container.lines
        drawn[container.get_label()] = (point.get_ydata()[0], tuple(bar.get_segments()[0][:, 1]))
    assert set(drawn) == {"demo_clean (clean, dose 0)", "demo_leaky_e10 (leaky, dose 10)", "demo_leaky_e30 (leaky, dose 30)"}
    assert drawn["demo_leaky_e30 (leaky, dose 30)"] == (pytest.approx(0.9), pytest.approx(wilson_by_hand(9, 10)))
    assert drawn["demo_clean (clean, dose 0)"] == (pytest.approx(0.1), pytest.approx(wilson_by_hand(1, 10)))
    assert "p_bonferroni < alpha" in significant.get_title()
    assert replicate_flag_rates([]) is None


def test_replicate_cells_stay_out_of_the_per_cell_figures():
    index = CellIndex.from_runs(replicate_runs())
    assert image_flag_rates(index) is None  # the only image cell is a corpus replicate
    pairs = pd.DataFrame({"model_a": ["demo_clean_s10"], "model_b": ["demo_clean_b"], "k": [10], "intersection": [1],
                          "jaccard": [0.05]})
    topk = tracked_replicate("clean", 10, "topk_jaccard", "none", {"p_value": 0.5, "flag": 0.0})
    assert jaccard_heatmaps(CellIndex.from_runs([topk]), {topk.run_id: pairs}) is None  # one matrix entry per replicate otherwise
    figures = {figure.name: figure for figure in draw_figures(index, {})}
    # the replicates at doses 0, 10 and 30 also draw the atlas's dose-response panel
    assert sorted(figures) == ["dose_response", "fig1_exchangeability_exch", "replicate_flag_rates"]
    # Fig. 1 reads the release-order family exch/none: demo_grid's model, not the replicates' own families
    (axes, _) = figures["fig1_exchangeability_exch"].figure.axes
    assert [tick.get_text() for tick in axes.get_xticklabels()] == ["demo_clean"]


def test_seed_ranges_are_compact():
    assert seed_ranges([12, 10, 11, 15, 17, 16]) == "10-12, 15-17"
    assert seed_ranges([3]) == "3" and seed_ranges([]) == ""
