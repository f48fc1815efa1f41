"""The dataset-level membership tests (dataset_inference, codec) on the offline demo, end to end
through ``python -m medexp``: demo_leaky, which trained on the demo test split, is flagged;
demo_clean, which saw neither the test split (members) nor the heldout split (non-members), is not.
200 examples per split keep the in-context rescoring small (measured with the shipped demo models:
leaky p 3.9e-6 and 5.7e-3, clean p 0.79 and 0.53; about 70 s on 2 busy cores). Each is one draw
of a trained model, so the test holds each to its detector's own rule at alpha 0.01, as the
run's flag does, and the clean one well clear of it."""

from __future__ import annotations

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import cell_runs, run_medexp

pytestmark = [pytest.mark.slow, pytest.mark.extended]


@pytest.fixture(scope="module")
def dataset_cells(demo_cache, tmp_path_factory):
    store = tmp_path_factory.mktemp('dataset-tests')
    uri = f"sqlite:///{store / 'mlflow.db'}"
    # a sweep dir of its own (the default one is shared by sweeps starting in the same second)
    result = run_medexp("-m", f"paths.cache_dir={demo_cache}", f"tracking.uri={uri}", f"hydra.sweep.dir={store / 'sweep'}",
                        "model=demo_clean,demo_leaky",
                        "detector=dataset_inference,codec", "bench.max_examples=200", timeout=1800)
    runs = cell_runs(result, uri)
    assert len(runs) == 4, result.stdout
    return MlflowClient(uri), runs


@pytest.mark.parametrize("detector", ["dataset_inference", "codec"])
def test_the_leaky_model_is_flagged_and_the_clean_one_is_not(dataset_cells, detector):
    _, runs = dataset_cells
    leaky, clean = runs[("demo_leaky", detector)].data.metrics, runs[("demo_clean", detector)].data.metrics
    for metrics in (leaky, clean):
        assert metrics["n_members"] == 200 and metrics["n_nonmembers"] == 200
    assert leaky["flag"] == 1.0 and leaky["p_value"] < 0.01, leaky["p_value"]
    assert clean["flag"] == 0.0 and clean["p_value"] > 0.05, clean["p_value"]


def test_dataset_inference_logs_its_halves_weights_and_effect(dataset_cells):
    client, runs = dataset_cells
    run = runs[("demo_leaky", "dataset_inference")]
    metrics = run.data.metrics
    assert metrics["n_members_half_b"] == metrics["n_nonmembers_half_b"] == 100
    assert {"weight.mean_logprob", "weight.min_k", "weight.min_k_pp", "weight.zlib_ratio"} <= set(metrics)
    assert metrics["cohens_d"] > metrics["mde"] > 0 and metrics["mean_difference"] > 0
    table = pd.read_parquet(client.download_artifacts(run.info.run_id, "per_example.parquet"))
    assert len(table) == 400 and set(table["half"]) == {"A", "B"}


def test_codec_members_of_the_leaky_model_gain_less_from_in_context_examples(dataset_cells):
    client, runs = dataset_cells
    run = runs[("demo_leaky", "codec")]
    metrics = run.data.metrics
    assert metrics["gain_mean_members"] < metrics["gain_mean_nonmembers"] and metrics["statistic"] > 0.5
    table = pd.read_parquet(client.download_artifacts(run.info.run_id, "per_example.parquet"))
    assert len(table) == 400 and (table["gain"] == table["logprob_in_context"] - table["logprob_alone"]).all()
