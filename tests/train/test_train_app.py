"""``python -m medexp.train`` on a user config folder's tiny ViT, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO
from tests.train.tiny import write_config_dir

pytestmark = [pytest.mark.slow, pytest.mark.extended]


def run_train(*overrides: str, cache, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_TRACKING_URI"}
    env["MEDEXP_CACHE"] = str(cache)
    return subprocess.run([sys.executable, "-m", "medexp.train", *overrides], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-app")
    conf = write_config_dir(root / "conf")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    args = ("--config-dir", str(conf), "models=[tiny_vit]", f"tracking.uri={uri}")
    first = run_train(*args, cache=root / "cache")
    second = run_train(*args, cache=root / "cache")
    return first, second, MlflowClient(uri), conf, root


def test_both_arms_of_every_seed_are_trained_and_logged(trained):
    first, _, client, _, _ = trained
    assert first.returncode == 0, first.stderr[-3000:]
    names = sorted(line.split()[0] for line in first.stdout.splitlines() if "  ready  " in line)
    assert names == ["tiny_vit-candidate-s1", "tiny_vit-candidate-s2", "tiny_vit-independent-s1",
                     "tiny_vit-independent-s2"]
    assert "4 models: 4 ready, 0 failed" in first.stdout
    runs = client.search_runs([client.get_experiment_by_name("medexp").experiment_id])
    assert len(runs) == 4
    for run in runs:
        assert run.data.tags["medexp.kind"] == "train" and run.info.status == "FINISHED"
        assert {"accuracy_train", "accuracy_test", "accuracy_canary", "final_loss", "steps"} <= set(run.data.metrics)
        assert run.data.params["model.train.arm"] == run.data.tags["medexp.train.arm"]
        assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["config.yaml", "training.json"]


def test_a_second_run_trains_and_logs_nothing_new(trained):
    first, second, client, _, root = trained
    assert second.returncode == 0, second.stderr[-3000:]
    assert len(client.search_runs([client.get_experiment_by_name("medexp").experiment_id])) == 4
    before = {line.split("run_id=")[1] for line in first.stdout.splitlines() if "run_id=" in line}
    after = {line.split("run_id=")[1] for line in second.stdout.splitlines() if "run_id=" in line}
    assert before == after
    assert len([path for path in (root / "cache" / "trained").glob("full-*-s*-*") if path.is_dir()]) == 4


def test_a_failing_model_is_a_failed_run_the_others_go_on_and_the_exit_status_is_1(trained, tmp_path):
    _, _, _, conf, root = trained
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # five images of four classes cannot be partitioned with stratification
    (conf / "model" / "tiny_broken.yaml").write_text(
        "defaults:\n  - tiny_vit\n  - _self_\nname: tiny_broken-${.train.arm}-s${.train.seed}\n"
        "train:\n  data:\n    demo_classes: {n_images: 5}\n  replicate_seeds: [1]\n")
    result = run_train("--config-dir", str(conf), "models=[tiny_broken,tiny_vit]", "seeds=[1]", f"tracking.uri={uri}",
                       cache=root / "cache", timeout=300)
    assert result.returncode == 1
    assert "tiny_broken-candidate-s1  FAILED: ValueError: cannot partition 5 examples" in result.stdout
    assert "tiny_vit-candidate-s1  ready" in result.stdout and "4 models: 2 ready, 2 failed" in result.stdout
    client = MlflowClient(uri)
    failed = client.search_runs([client.get_experiment_by_name("medexp").experiment_id], "attributes.status = 'FAILED'")
    assert sorted(run.info.run_name for run in failed) == ["tiny_broken-candidate-s1", "tiny_broken-independent-s1"]
    assert all("cannot partition" in run.data.tags["medexp.error"] for run in failed)


def test_listing_nothing_is_refused(trained, tmp_path):
    _, _, _, conf, _ = trained
    empty = run_train("--config-dir", str(conf), cache=tmp_path, timeout=120)
    assert empty.returncode != 0 and "nothing to train" in empty.stderr
