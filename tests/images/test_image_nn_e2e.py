"""``python -m medexp detector=image_nn`` on the offline demo, logged to a temporary MLflow store."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import parse_summary, run_medexp

pytestmark = pytest.mark.slow


def test_image_nn_cell_logs_metrics_tables_and_panels(tmp_path, tracking_uri):
    from mlflow.tracking import MlflowClient

    # model=none: image_nn reads no model, so none is built (building the demo models takes minutes)
    result = run_medexp("detector=image_nn", "model=none", f"tracking.uri={tracking_uri}",
                        f"paths.cache_dir={tmp_path / 'cache'}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = parse_summary(result.stdout)
    assert summary["flag"] == "True"
    client = MlflowClient(tracking_uri)
    run = client.get_run(summary["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["medexp.detector"] == "image_nn-phash-demo"
    assert run.data.tags["medexp.family"] == "image_nn/none"
    metrics = run.data.metrics
    for key in ("p_value", "statistic", "n_examples", "flag", "image_flag_rate", "n_images_flagged", "question_flag_rate",
                "n_exact_duplicates_images", "tau", "tau_degenerate", "corpus_duplicate_rate", "truth_recall"):
        assert key in metrics
    assert metrics["n_examples"] == 400 and metrics["truth_recall"] >= 0.95 and metrics["p_value"] < 1e-10
    assert metrics["image_flag_rate"] == pytest.approx(metrics["n_images_flagged"] / 400)
    assert metrics["n_exact_duplicates_images"] == 0 and metrics["tau_degenerate"] == 0  # the copies are perturbed
    top = {item.path for item in client.list_artifacts(run.info.run_id)}
    assert {"alpha_sweep.png", "nn_distances.png", "alpha_sweep.parquet", "flagged_pairs.parquet",
            "nearest_neighbours.parquet", "questions.parquet", "adjudication"} <= top
    panels = client.list_artifacts(run.info.run_id, "adjudication")
    assert len(panels) == 20 and all(item.path.endswith(".png") for item in panels)
    pairs = pd.read_parquet(client.download_artifacts(run.info.run_id, "flagged_pairs.parquet", str(tmp_path)))
    assert len(pairs) == metrics["n_images_flagged"]
    assert pairs["distance"].is_monotonic_increasing and (pairs["distance"] < metrics["tau"]).all()
    assert {"example_id", "neighbour_id", "distance"} <= set(pairs.columns)
