"""The confound simulation through ``python -m medexp``: the preset, a single cell, and refusals."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from medexp.config import compose
from medexp.runner.evaluate import evaluate
from tests.conftest import parse_summary, run_medexp
from tests.synthetic.world import HIGH_GAIN, LOW_GAIN


def _runs_by_model(uri: str) -> dict:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("medexp")
    runs = client.search_runs([experiment.experiment_id], "tags.`medexp.bench` = 'synthetic'")
    return {(run.data.tags["medexp.model"], run.data.tags["medexp.detector"]): run for run in runs}


@pytest.mark.extended
def test_the_preset_logs_one_run_per_cohort_model_and_the_composition_sweep(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run_medexp("experiment=confound_simulation", f"tracking.uri={uri}", f"paths.cache_dir={tmp_path}",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = _runs_by_model(uri)
    assert set(runs) == {(model, "mink_tail") for model in LOW_GAIN + HIGH_GAIN} | {("probe", "composition_sweep")}
    assert all(run.info.status == "FINISHED" for run in runs.values())
    for model in LOW_GAIN:
        metrics = runs[(model, "mink_tail")].data.metrics
        assert metrics["pr_delta_gt_100"] == 0.0 and metrics["flag"] == 0.0 and metrics["delta_max"] < 100
    for model in HIGH_GAIN:  # the band of test_synthetic_control (seed 20260531, set by the preset)
        metrics = runs[(model, "mink_tail")].data.metrics
        assert 0.285 <= metrics["pr_delta_gt_100"] <= 0.348 and 1500 <= metrics["delta_max"] <= 6000
        assert metrics["flag"] == 1.0
        assert runs[(model, "mink_tail")].data.params["seed"] == "20260531"
    sweep = runs[("probe", "composition_sweep")].data.metrics
    assert [sweep[f"false_positive_flag_prob_{k}"] for k in range(5)] == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert "p_value" not in sweep
    client = MlflowClient(uri)
    artefacts = sorted(a.path for a in client.list_artifacts(runs[("probe", "composition_sweep")].info.run_id))
    assert artefacts == ["composition_sweep.png", "config.yaml", "per_draw.parquet", "per_outlier_count.parquet"]
    assert "descriptive  control_order_spearman=1  draws=200  false_positive_flag_prob_0=0" in result.stdout


@pytest.mark.extended
def test_a_single_cell_with_explicit_overrides(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run_medexp("model=synthetic", "model.name=clean_baseline", "bench=synthetic", "control=synthetic",
                        "detector=mink_tail", "detector.thresholds=[50,100]", "detector.flag_threshold=100",
                        "detector.flag_fraction=0.05", "seed=0", f"tracking.uri={uri}",
                        f"paths.cache_dir={tmp_path}", f"hydra.run.dir={tmp_path / 'run'}", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = parse_summary(result.stdout)
    assert summary["flag"] == "True" and float(summary["p_value"]) < 0.01
    metrics = MlflowClient(uri).get_run(summary["run_id"]).data.metrics
    assert 0.285 <= metrics["pr_delta_gt_100"] <= 0.348 and metrics["n_models"] == 5


@pytest.mark.parametrize("overrides, message", [
    (["control=synthetic", "detector=exch_rank"], "control=synthetic does not apply to detector=exch_rank"),
    (["control=synthetic", "detector=exch"], "control=synthetic does not apply to detector=exch"),
    (["control=synthetic", "detector=image_nn"], "control=synthetic does not apply to detector=image_nn"),
    (["control=none", "detector=exch_rank"], "model=synthetic is a synthetic calibration-model member .* no weights"),
    (["control=synthetic", "detector=mink_tail", "bench=demo", "model.name=high_gain_a"],
     r"needs examples with an easiness \(bench=synthetic\)"),
])
def test_synthetic_pieces_refuse_what_they_cannot_do(tmp_path, overrides, message):
    cfg = compose(["model=synthetic", "bench=synthetic", f"paths.cache_dir={tmp_path}", *overrides])
    with pytest.raises(ValueError, match=message):
        evaluate(cfg, seed=0)
