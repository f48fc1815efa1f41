"""MedVIGIL figures draw from small tables."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

from medexp.detectors.medvigil import evaluate_medvigil, probe_facts
from medexp.detectors.medvigil_figures import blur_decay_figure, decay_table, mcs_components_figure, tier_sfr_heatmap
from tests.detectors.medvigil_tables import build

MODELS = pd.DataFrame({
    "model": ["opus", "flash", "4o"], "cap": [79.9, 77.4, 54.8], "safe": [74.8, 57.4, 36.0],
    "ground": [57.3, 59.6, 45.3], "mcs": [69.2, 63.7, 44.1], "mcs_ci_low": [66.6, 59.7, 40.4],
    "mcs_ci_high": [72.1, 66.8, 47.2],
})


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def test_mcs_components_orders_models_by_mcs():
    figure = mcs_components_figure(MODELS)
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["4o", "flash", "opus"]
    assert len(axes.patches) == 3 * len(MODELS)  # three component bars per model
    assert _png(figure).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match=r"needs column\(s\) \['ground'\]"):
        mcs_components_figure(MODELS.drop(columns="ground"))


def test_tier_heatmap_sorts_safest_first_and_leaves_gaps_blank():
    frame = pd.DataFrame({"model": ["a", "b"], "acc_orig": [80.0, 60.0], "sfr_L1": [5.0, 10.0],
                          "sfr_L2": [math.nan, 30.0], "sfr_L3": [20.0, 50.0], "sfr_L4": [25.0, 70.0],
                          "sfr_L5": [30.0, 80.0], "sfr_w": [24.0, 64.0]})
    figure = tier_sfr_heatmap(frame.iloc[::-1])
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["a", "b"]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["Acc_orig", "L1", "L2", "L3", "L4", "L5", "SFR_w"]
    texts = [text.get_text() for text in axes.texts]
    assert len(texts) == 2 * 7 - 1 and "24.0" in texts  # the undefined L2 cell has no label
    assert _png(figure).startswith(b"\x89PNG")


def test_blur_decay_from_cell_metrics():
    probes, responses = build()
    metrics = evaluate_medvigil(responses, probe_facts(probes), seed=0, n_resamples=50)["metrics"]
    table = decay_table({"model-x": metrics})
    assert set(table["group"]) == {"image_required", "text_answerable"}
    required = table[table["group"] == "image_required"].set_index("sigma")["acc"]
    assert required[0.0] == pytest.approx(200 / 3) and required[math.inf] == pytest.approx(100 / 3)
    figure = blur_decay_figure(table, l_star={"model-x": metrics["l_star_errors_wrong"]})
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["0", "8", "no image"]
    assert len(axes.lines) >= 4  # two curves, two no-image markers (and the L* line)
    assert _png(figure).startswith(b"\x89PNG")
