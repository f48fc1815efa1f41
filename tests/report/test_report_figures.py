"""Figures from tracked runs: each is drawn only when its runs exist, from the values of those runs."""

from __future__ import annotations

import pandas as pd

from medexp.report.artefacts import derived_values
from medexp.report.cells import CellIndex
from medexp.report.figures import draw_figures, exchangeability_heatmaps, image_flag_rates
from tests.report.tracked_cells import tracked


def _texts(figure) -> list[str]:
    return [text.get_text() for axes in figure.axes for text in axes.texts]


def test_no_runs_no_figures():
    assert draw_figures(CellIndex.from_runs([]), {}) == []


def test_exchangeability_heatmap_marks_p_below_001_per_family_under_release_order_only():
    index = CellIndex.from_runs([
        tracked("qwen", "slake", "exch_rank", "none", {"p_value": 0.0005}),
        tracked("qwen", "pathvqa", "exch_rank", "none", {"p_value": 0.99}),
        tracked("chexagent", "slake", "exch_rank", "none", {"p_value": 0.01}),
        tracked("qwen", "slake", "exch_rank", "order_hash", {"p_value": 0.002}),  # not the release order
        tracked("qwen", "slake", "mink_tail", "none", {"p_value": 0.0001}),  # not an exchangeability family
    ])
    (heatmap,) = exchangeability_heatmaps(index)
    assert heatmap.name == "fig1_exchangeability_exch_rank"
    # p = 0.01 is not below 0.01; the hash-order and mink_tail p-values are not drawn
    assert sorted(_texts(heatmap.figure)) == ["0.0005 *", "0.01", "0.99"]
    axes = heatmap.figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["chexagent", "qwen"]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["pathvqa", "slake"]
    assert [figure.name for figure in draw_figures(index, {})] == ["fig1_exchangeability_exch_rank"]


def test_image_flag_rates_label_negative_controls_by_their_image_set():
    image = {"tau_alpha": 0.01, "n_images": 1000.0}
    index = CellIndex.from_runs([
        tracked("m", "slake", "image_nn-b16", "none", {**image, "image_flag_rate": 0.198, "n_images_flagged": 198.0}),
        tracked("m", "slake", "image_nn-b16", "negative_wikiart", {**image, "image_flag_rate": 0.0, "n_images_flagged": 0.0},
                params={"control.kind": "negative_images", "control.images.name": "wikiart"}),
    ])
    figure = image_flag_rates(index)
    axes = figure.figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["slake", "wikiart (negative control)"]
    bars = sorted(axes.patches, key=lambda bar: bar.get_x())  # left to right, as labelled
    assert [round(bar.get_height(), 6) for bar in bars] == [19.8, 0.0]
    assert sorted(_texts(figure.figure)) == ["0/1000", "198/1000"]


def test_sweep_pair_and_confound_figures_follow_their_tables_and_metrics():
    sweep = pd.DataFrame({"alpha": [0.001, 0.1], "flag_rate": [0.1, 0.3], "p_value": [1e-5, 1e-9]})
    pairs = pd.DataFrame({"model_a": ["a"], "model_b": ["b"], "intersection": [25], "k": [25], "jaccard": [1.0]})
    runs = [
        tracked("m", "slake", "image_nn-b16", "none", {"image_flag_rate": 0.2, "tau_alpha": 0.01}, run_id="image"),
        tracked("a", "slake", "topk_jaccard", "none", {"p_value": 1e-6}, run_id="pairs"),
        tracked("probe", "synthetic", "composition_sweep", "synthetic",
                {f"false_positive_flag_prob_{k}": float(k >= 2) for k in range(5)}),
    ]
    tables = {"alpha_sweep": {"image": sweep}, "per_pair": {"pairs": pairs}}
    index = CellIndex.from_runs(runs, derived_values(tables))
    names = [figure.name for figure in draw_figures(index, tables)]
    assert names == ["fig2_image_nn_flag_rates", "fig3_alpha_sweep", "fig5_topk_jaccard", "fig7_confound"]
    confound = draw_figures(index, tables)[-1].figure
    (line,) = confound.axes[0].get_lines()  # only panel (b): no synthetic tail cells were tracked
    assert list(line.get_xdata()) == [0, 1, 2, 3, 4] and list(line.get_ydata()) == [0, 0, 1, 1, 1]
    # values derived from the alpha sweep: the largest p, the smallest rate, the alpha span
    image = next(cell for cell in index.finished if cell.run_id == "image").values
    assert (image["alpha_sweep_max_p_value"], image["alpha_sweep_min_flag_rate"], image["alpha_sweep_span"]) \
        == (1e-5, 0.1, 100.0)


def _medvigil_values(cap: float, safe: float, ground: float, mcs: float, sfr: float) -> dict[str, float]:
    values = {"cap": cap, "safe": safe, "ground": ground, "mcs": mcs, "mcs_ci_low": mcs - 5, "mcs_ci_high": mcs + 5,
              "acc_orig": 60.0, "sfr_w": sfr, **{f"sfr_L{tier}": sfr for tier in range(1, 6)}}
    out = {f"{name}_errors_wrong": value for name, value in values.items() if not name.endswith(("_low", "_high"))}
    out |= {"mcs_errors_wrong_ci_low": mcs - 5, "mcs_errors_wrong_ci_high": mcs + 5}
    for sigma, acc in ((0, 60.0), (8, 40.0)):
        out[f"decay_image_required_sigma_{sigma}_errors_wrong"] = acc
    out["decay_image_required_no_image_errors_wrong"] = 20.0
    out["l_star_errors_wrong"] = 8.0
    return out


def test_medvigil_figures_put_every_model_of_a_benchmark_side_by_side():
    index = CellIndex.from_runs([
        tracked("safe_model", "demo", "medvigil_demo", "none", _medvigil_values(70, 80, 60, 69.0, 20)),
        tracked("bold_model", "demo", "medvigil_demo", "none", _medvigil_values(80, 10, 50, 24.6, 90)),
        tracked("other", "slake", "medvigil", "none", _medvigil_values(50, 50, 50, 50.0, 50)),
        tracked("exch_only", "demo", "exch", "none", {"p_value": 0.5}),
    ])
    names = [figure.name for figure in draw_figures(index, {}) if figure.name.startswith("medvigil_")]
    assert names == [f"medvigil_demo_medvigil_demo_{kind}" for kind in ("mcs_components", "tier_sfr", "blur_decay")] \
        + [f"medvigil_slake_medvigil_{kind}" for kind in ("mcs_components", "tier_sfr", "blur_decay")]
    components = next(f for f in draw_figures(index, {}) if f.name == "medvigil_demo_medvigil_demo_mcs_components")
    labels = [label.get_text() for label in components.figure.axes[0].get_yticklabels()]
    assert labels == ["bold_model", "safe_model"]  # ordered by MCS, lowest first; one row per model
