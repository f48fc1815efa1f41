"""The cell runner without a model: keys, seeds, reuse, and failure recording."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

import medexp.runner as runner
from medexp.config import compose
from medexp.detectors import DetectorResult
from medexp.runner.cell import Cell


def test_cell_key_and_seed_match_a_hand_computation():
    cell = Cell("demo_leaky", "demo", "exch", "none")
    assert cell.key == "model=demo_leaky,bench=demo,detector=exch,control=none"
    digest = hashlib.sha256(f"7|{cell.key}".encode()).digest()
    assert cell.seed(7) == int.from_bytes(digest[:4], "little")
    assert cell.seed(7) != cell.seed(8)
    assert Cell("demo_clean", "demo", "exch", "none").seed(7) != cell.seed(7)


@pytest.fixture()
def cfg_for(tmp_path):
    def make(*overrides):
        return compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", *overrides])

    return make


def _fake_result(p_value):
    table = pd.DataFrame({"example_id": ["a", "b"], "score": [1.0, 2.0]})
    return DetectorResult({"p_value": p_value, "statistic": 1.5, "n_examples": 2.0, "flag": 0.0}, table, "per_example")


def test_finished_cells_are_reused_only_with_identical_settings(cfg_for, monkeypatch):
    calls = []

    def evaluate(cfg, seed):
        calls.append(seed)
        result = _fake_result(0.25)
        return dict(result.metrics), result

    monkeypatch.setattr(runner, "evaluate", evaluate)
    first = runner.run_cell(cfg_for())
    assert first.status == "FINISHED" and first.metrics["p_value"] == 0.25
    assert runner.run_cell(cfg_for()).status == "CACHED"
    assert runner.run_cell(cfg_for("force=true")).status == "FINISHED"
    assert runner.run_cell(cfg_for("seed=1")).status == "FINISHED"
    assert len(calls) == 3 and calls[0] == calls[1] != calls[2]
    client = MlflowClient(cfg_for().tracking.uri)
    run = client.get_run(first.run_id)
    assert run.data.params["detector.permutations"] == "250"
    assert sorted(a.path for a in client.list_artifacts(first.run_id)) == ["config.yaml", "per_example.parquet"]


@pytest.mark.parametrize("error", [ValueError("bad scores"), KeyboardInterrupt()])
def test_a_crash_ends_the_run_failed_with_the_error(cfg_for, monkeypatch, error):
    def evaluate(cfg, seed):
        raise error

    monkeypatch.setattr(runner, "evaluate", evaluate)
    if isinstance(error, Exception):
        outcome = runner.run_cell(cfg_for())
        assert outcome.status == "FAILED" and "bad scores" in outcome.summary()
    else:
        with pytest.raises(KeyboardInterrupt):
            runner.run_cell(cfg_for())
    client = MlflowClient(cfg_for().tracking.uri)
    (run,) = client.search_runs([client.get_experiment_by_name("medexp").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.tags["medexp.error"].startswith(type(error).__name__)
    # A failed cell is never reused as finished.
    monkeypatch.setattr(runner, "evaluate", lambda cfg, seed: (_fake_result(0.5).metrics, _fake_result(0.5)))
    assert runner.run_cell(cfg_for()).status == "FINISHED"


def test_tracking_uri_precedence(monkeypatch, tmp_path):
    from medexp.tracking import tracking_uri

    default = compose([]).tracking
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(default, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5001")
    assert tracking_uri(default, tmp_path) == "http://127.0.0.1:5001"
    assert tracking_uri(compose(["tracking.uri=sqlite:///x.db"]).tracking, tmp_path) == "sqlite:///x.db"
