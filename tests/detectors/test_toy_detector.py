"""A new detector is a schema, an evaluator with its declaration, a YAML file and tests: the toy
detector of tests/detectors/toy.py, added that way from the test tree alone (two table entries,
the schema stored for Hydra, its YAML found through hydra.searchpath), runs as a tracked cell on a
record of scores, refuses a control it does not declare, and gets a power estimate from
``python -m medexp.power``'s code, each checked against a hand computation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hydra.core.config_store import ConfigStore
from mlflow.tracking import MlflowClient
from scipy import stats

from medexp.config import compose
from medexp.config.schemas import DETECTOR_SCHEMAS
from medexp.detectors import DETECTORS
from medexp.stats import sample_size as pw
from tests.detectors.toy import ToyConfig
from tests.records.conftest import audit_document, slake_rows

TOY_CONF = Path(__file__).parent / "toy_conf"


@pytest.fixture()
def toy(monkeypatch):
    monkeypatch.setitem(DETECTOR_SCHEMAS, "toy", ToyConfig)
    monkeypatch.setitem(DETECTORS, "toy", "tests.detectors.toy:DECLARATION")
    ConfigStore.instance().store(group="schema/detector", name="toy", node=ToyConfig)


def _cell(tmp_path, *overrides):
    root = tmp_path / "slake"
    root.mkdir(exist_ok=True)
    (root / "test.json").write_text(json.dumps(slake_rows()), encoding="utf-8")
    record = tmp_path / "audit.json"
    record.write_text(json.dumps(audit_document()), encoding="utf-8")
    return compose([f"hydra.searchpath=[file://{TOY_CONF}]", "detector=toy",
                    f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"paths.cache_dir={tmp_path / 'cache'}",
                    "bench=slake", f"bench.root={root}", "model=scores", "model.name=model_a",
                    f"model.scores.path={record}", "model.scores.model=Model-A", *overrides])


def test_the_toy_detector_runs_as_a_tracked_cell(toy, tmp_path):
    from medexp.runner.cell_run import run_cell

    cfg = _cell(tmp_path)
    outcome = run_cell(cfg)
    assert outcome.status == "FINISHED", outcome.error
    # by hand: Model-A's mean log-prob of question qid is -(qid % 7), the English questions in release order
    scores = [-(row["qid"] % 7) for row in slake_rows() if row["q_lang"] == "en"]
    expected = stats.spearmanr(np.arange(len(scores)), scores, alternative="less")
    assert outcome.metrics["p_value"] == pytest.approx(expected.pvalue)
    assert outcome.metrics["statistic"] == pytest.approx(expected.statistic)
    assert outcome.metrics["mde"] == pytest.approx(pw.spearman_mde(12, 0.05))
    run = MlflowClient(cfg.tracking.uri).get_run(outcome.run_id)
    assert run.info.status == "FINISHED" and run.data.params["detector.name"] == "toy"
    assert run.data.metrics["p_value"] == pytest.approx(expected.pvalue)


def test_a_control_the_toy_does_not_declare_is_refused_before_any_work(toy, tmp_path):
    from medexp.runner.cell_run import run_cell

    outcome = run_cell(_cell(tmp_path, "control=order_answer_len"))
    assert outcome.status == "FAILED"
    assert "control=order_answer_len does not apply to detector=toy: it applies to " in outcome.error
    assert not (tmp_path / "cache" / "scores").exists()


def test_the_power_command_answers_for_the_toy_from_its_declaration(toy, tmp_path):
    from medexp.power import answer

    lines = answer(_cell(tmp_path), {"effect": 0.5, "power": 0.8, "accuracy": 0.5, "correlation": 0.5,
                                     "chance": None, "tail_rate": None})
    assert "test: one-sided Spearman test: earlier examples score higher" in lines
    assert "n: 12 examples" in lines
    assert f"MDE: {pw.spearman_mde(12, 0.05, 0.8, 'one'):.4g} Spearman rho (position vs score)" in lines
    needed = pw.spearman_n(0.5, 0.05, 0.8, "one")
    assert any(line.startswith(f"effect 0.5 needs n = {needed} examples") for line in lines)
