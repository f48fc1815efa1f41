"""The cell runner without a model: keys, seeds, reuse, and failure recording."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from medexp.kernel.cell import Cell
from medexp.config import compose
from medexp.detectors import DetectorResult
from medexp.runner import cell_run


def test_cell_key_and_seed_match_a_hand_computation():
    cell = Cell("demo_leaky", "demo", "exch", "none")
    assert cell.key == "model=demo_leaky,bench=demo,detector=exch,control=none"
    digest = hashlib.sha256(f"7|{cell.key}".encode()).digest()
    assert cell.seed(7) == int.from_bytes(digest[:4], "little")
    assert cell.seed(7) != cell.seed(8)
    assert Cell("demo_clean", "demo", "exch", "none").seed(7) != cell.seed(7)


@pytest.fixture()
def cfg_for(tmp_path, monkeypatch):
    """Configs of the default cell on a temporary store; its inputs are faked (no model is built)."""
    inputs = SimpleNamespace(benchmark=None, corpus=None, bench_hash="b0", inputs_hash="i0", judge=None)
    monkeypatch.setattr(cell_run, "load_inputs", lambda cfg, cache_dir: inputs)

    def make(*overrides):
        return compose([f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"paths.cache_dir={tmp_path / 'cache'}",
                        *overrides])

    make.inputs = inputs
    return make


def _fake_result(p_value):
    table = pd.DataFrame({"example_id": ["a", "b"], "score": [1.0, 2.0]})
    return DetectorResult({"p_value": p_value, "statistic": 1.5, "n_examples": 2.0, "flag": 0.0}, table, "per_example")


def test_finished_cells_are_reused_only_with_identical_settings(cfg_for, monkeypatch):
    calls = []

    def evaluate(cfg, seed, inputs):
        calls.append(seed)
        result = _fake_result(0.25)
        return dict(result.metrics), result

    monkeypatch.setattr(cell_run, "evaluate", evaluate)
    first = cell_run.run_cell(cfg_for())
    assert first.status == "FINISHED" and first.metrics["p_value"] == 0.25
    assert cell_run.run_cell(cfg_for()).status == "CACHED"
    assert cell_run.run_cell(cfg_for("force=true")).status == "FINISHED"
    assert cell_run.run_cell(cfg_for("seed=1")).status == "FINISHED"
    assert len(calls) == 3 and calls[0] == calls[1] != calls[2]
    cfg_for.inputs.inputs_hash = "i1"  # an edited benchmark, a replaced image, new weights
    assert cell_run.run_cell(cfg_for()).status == "FINISHED"
    monkeypatch.setattr(cell_run, "PERMUTATION_ENGINE", "other draws")  # a seed gives other permutations
    assert cell_run.run_cell(cfg_for()).status == "FINISHED"
    assert len(calls) == 5
    client = MlflowClient(cfg_for().tracking.uri)
    run = client.get_run(first.run_id)
    assert run.data.params["detector.permutations"] == "250"
    assert "medexp.warnings" not in run.data.tags and "WARNING" not in first.summary()  # no warning: no tag
    assert sorted(a.path for a in client.list_artifacts(first.run_id)) == ["config.yaml", "per_example.parquet"]


def test_a_detectors_warnings_are_logged_tagged_and_printed(cfg_for, monkeypatch, caplog):
    def evaluate(cfg, seed, inputs):
        result = _fake_result(0.25)
        result.warnings.extend(["tau = 0 is degenerate", "second warning"])
        return dict(result.metrics), result

    monkeypatch.setattr(cell_run, "evaluate", evaluate)
    with caplog.at_level("WARNING", logger="medexp"):
        outcome = cell_run.run_cell(cfg_for())
    assert outcome.status == "FINISHED" and outcome.warnings == ("tau = 0 is degenerate", "second warning")
    assert outcome.summary().endswith("\n  WARNING: tau = 0 is degenerate\n  WARNING: second warning")
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"cell {outcome.cell_key}: tau = 0 is degenerate", f"cell {outcome.cell_key}: second warning"]
    tags = MlflowClient(cfg_for().tracking.uri).get_run(outcome.run_id).data.tags
    assert tags["medexp.warnings"] == "tau = 0 is degenerate\nsecond warning"


@pytest.mark.parametrize("error", [ValueError("bad scores"), KeyboardInterrupt()])
def test_a_crash_ends_the_run_failed_and_ctrl_c_killed(cfg_for, monkeypatch, error):
    def evaluate(cfg, seed, inputs):
        raise error

    monkeypatch.setattr(cell_run, "evaluate", evaluate)
    if isinstance(error, Exception):
        outcome = cell_run.run_cell(cfg_for())
        assert outcome.status == "FAILED" and "bad scores" in outcome.summary()
    else:
        with pytest.raises(KeyboardInterrupt):
            cell_run.run_cell(cfg_for())
    client = MlflowClient(cfg_for().tracking.uri)
    (run,) = client.search_runs([client.get_experiment_by_name("medexp").experiment_id])
    if isinstance(error, Exception):
        assert run.info.status == "FAILED"
        assert run.data.tags["medexp.error"].startswith(type(error).__name__)
    else:
        assert run.info.status == "KILLED"
        assert run.data.tags["medexp.signal"] == "SIGINT"
    # A failed or killed cell is never reused as finished.
    monkeypatch.setattr(cell_run, "evaluate", lambda cfg, seed, inputs: (_fake_result(0.5).metrics, _fake_result(0.5)))
    assert cell_run.run_cell(cfg_for()).status == "FINISHED"


def test_a_benchmark_that_cannot_be_loaded_ends_the_run_failed(cfg_for, monkeypatch):
    def missing(cfg, cache_dir):
        raise FileNotFoundError("benchmark 'demo': no test.jsonl")

    monkeypatch.setattr(cell_run, "load_inputs", missing)
    outcome = cell_run.run_cell(cfg_for())
    assert outcome.status == "FAILED" and "no test.jsonl" in outcome.error


@pytest.mark.parametrize("override,message", [
    ("detector.alpha=1.5", "detector.alpha=1.5 is out of range: allowed (0, 1)"),
    ("detector.permutations=0", "detector.permutations=0 is out of range: allowed >= 1"),
    ("detector.stride=2048", "detector.stride=2048 must be smaller than detector.context_length=1024"),
])
def test_bad_values_fail_before_anything_is_loaded_or_tracked(cfg_for, monkeypatch, override, message):
    from medexp.config.ranges import ConfigRangeError

    monkeypatch.setattr(cell_run, "load_inputs", lambda cfg, cache_dir: pytest.fail("inputs loaded"))
    with pytest.raises(ConfigRangeError) as raised:
        cell_run.run_cell(cfg_for(override))
    assert message in str(raised.value)
    assert not (cfg_for().tracking.uri.removeprefix("sqlite:///") and
                Path(cfg_for().tracking.uri.removeprefix("sqlite:///")).exists())


def test_tracking_uri_precedence(monkeypatch, tmp_path):
    from medexp.tracking import tracking_uri

    default = compose([]).tracking
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(default, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5001")
    assert tracking_uri(default, tmp_path) == "http://127.0.0.1:5001"
    assert tracking_uri(compose(["tracking.uri=sqlite:///x.db"]).tracking, tmp_path) == "sqlite:///x.db"
