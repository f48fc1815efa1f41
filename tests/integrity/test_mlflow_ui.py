"""The experiments medexp creates carry what the MLflow UI needs to show them as a runs table (the
experiment kind and medexp's view), older experiments get it, and the view's columns are what a
cell run records. What the UI does with them is checked in a browser: tests/browser."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from medexp.config import compose
from medexp.runner.cell_run import run_cell
from medexp.tracking import Tracker
from medexp.tracking.ui import (
    COMPARED_METRICS,
    COMPARED_TAGS,
    EXPERIMENT_KIND_TAG,
    GROUP_BY_TAG,
    VIEW_TAG,
    runs_table_url,
)


@pytest.fixture(scope="module")
def uri(tmp_path_factory) -> str:
    """One sqlite store for the module (creating one takes seconds); each test has its own experiment."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def _open(uri: str, experiment: str, tmp_path) -> Tracker:
    return Tracker(compose([f"tracking.uri={uri}", f"tracking.experiment={experiment}"]).tracking, tmp_path)


def test_a_new_experiment_is_tagged_as_model_runs_with_medexp_view(uri, tmp_path):
    tracker = _open(uri, "new", tmp_path)
    tags = MlflowClient(uri).get_experiment(tracker.experiment_id).tags
    assert tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    view = json.loads(tags[VIEW_TAG])
    assert view["selectedColumns"] == [
        "tags.`medexp.model`", "tags.`medexp.bench`", "tags.`medexp.detector`", "tags.`medexp.control`",
        "metrics.`p_value`", "metrics.`flag`"]
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "medexp.detector"}]


def test_an_older_experiment_gets_the_tags_and_keeps_a_kind_chosen_in_the_ui(uri, tmp_path):
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("older")  # as medexp made it before the tags
    assert EXPERIMENT_KIND_TAG not in client.get_experiment(experiment_id).tags
    assert _open(uri, "older", tmp_path).experiment_id == experiment_id
    tags = client.get_experiment(experiment_id).tags
    assert tags[EXPERIMENT_KIND_TAG] == "custom_model_development" and VIEW_TAG in tags

    client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, "genai_development")  # the user's choice
    client.set_experiment_tag(experiment_id, VIEW_TAG, json.dumps({"selectedColumns": []}))  # an older view
    _open(uri, "older", tmp_path)
    again = client.get_experiment(experiment_id).tags
    assert again[EXPERIMENT_KIND_TAG] == "genai_development"
    assert again[VIEW_TAG] == tags[VIEW_TAG]


def test_the_view_names_tags_and_metrics_a_cell_run_records(uri, tmp_path):
    """A synthetic cell (no model; a second): every column of the view is on its run."""
    cfg = compose(["model=synthetic", "model.name=high_gain_a", "bench=synthetic", "control=synthetic",
                   "detector=mink_tail", f"tracking.uri={uri}", "tracking.experiment=cell",
                   f"paths.cache_dir={tmp_path}"])
    outcome = run_cell(cfg)
    assert outcome.status == "FINISHED", outcome.error
    run = MlflowClient(uri).get_run(outcome.run_id)
    assert set(COMPARED_TAGS) | {GROUP_BY_TAG} <= set(run.data.tags)
    assert set(COMPARED_METRICS) <= set(run.data.metrics)


def test_the_runs_table_url_opens_model_training_in_medexp_view():
    assert runs_table_url("http://127.0.0.1:5000/", "7") == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=medexp")
