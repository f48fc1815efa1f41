"""The README's membership figures, from its own commands on a fresh cache (about 6 min on 2 cores):

    python -m pytest -m validation tests/validation/test_readme_membership.py -s

runs ``python -m medexp.train 'models=[demo_leaky]' references=8``, which installs the shipped
candidate, its independent model and the eight shipped reference models (nothing trains: the
figures are those of the same weights on every machine), then
``python -m medexp model=demo_leaky detector=membership_references``, and compares the cell's
RMIA AUC and the range of the references' AUCs (each attacked as if it were the candidate) with
the README's sentence. Scoring runs on the host's own kernels, which move a score in its fifth
significant digit (docs/portability.md), so a figure may differ from the metric by half a unit of
its last printed digit and 1e-4 more.
"""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import cell_runs, run_medexp
from tests.readme_figures import membership_figures
from tests.train.test_train_app import run_train

pytestmark = pytest.mark.validation


def _agrees(shown: str, measured: float) -> bool:
    """Whether the README's ``shown`` is ``measured`` to the digits it prints (and 1e-4 more)."""
    digits = len(shown.split(".")[1])
    return abs(float(shown) - measured) <= 0.5 * 10.0 ** -digits + 1e-4


def test_the_readme_membership_sentence_is_what_its_commands_print(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trained = run_train("models=[demo_leaky]", "references=8", f"tracking.uri={uri}", cache=tmp_path / "cache")
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    assert "building demo reference model" not in trained.stdout + trained.stderr  # installed, not trained
    assert "10 models: 10 ready, 0 failed" in trained.stdout

    cell = run_medexp("model=demo_leaky", "detector=membership_references", f"paths.cache_dir={tmp_path / 'cache'}",
                      f"tracking.uri={uri}", timeout=1800)
    assert cell.returncode == 0, cell.stdout[-3000:] + cell.stderr[-3000:]
    metrics = cell_runs(cell, uri)[("demo_leaky", "membership_references")].data.metrics
    measured = {"rmia_auc": metrics["rmia_auc"], "reference_min": metrics["rmia_reference_target_auc_min"],
                "reference_max": metrics["rmia_reference_target_auc_max"]}
    print("measured:", {key: round(value, 6) for key, value in measured.items()})
    shown = membership_figures()
    for key, value in measured.items():
        assert _agrees(shown[key], value), f"README {key} {shown[key]}, measured {value:.6f}"
    client = MlflowClient(uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    assert client.search_runs(experiments, "tags.`medexp.reference` = '7'")  # the references' training runs, logged
