"""Reference models for membership end to end: ``python -m medexp.train references=2`` builds two
references of a leaky demo model (one leak pass, to stay cheap) on complementary halves of the
demo's test and heldout splits; a ``detector=membership_references`` cell then finds them in the
cache and attacks with them (online LiRA, RMIA and the offline LiRA's OUT side)."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from medexp.benchmarks.local import load_local
from medexp.config import compose
from medexp.demo.cache import demo_benchmark_root
from tests.conftest import cell_runs, run_medexp
from tests.train.test_train_app import run_train

pytestmark = pytest.mark.slow

LEAKY = "demo_leaky demo.leak_epochs=1"


@pytest.mark.extended
def test_train_builds_complementary_reference_halves_and_a_cell_attacks_with_them(demo_cache, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trained = run_train(f"models=['{LEAKY}']", "references=2", f"tracking.uri={uri}", cache=demo_cache)
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    ready = sorted(line.split()[0] for line in trained.stdout.splitlines() if "  ready  " in line)
    assert ready == ["demo_clean", "demo_leaky", "demo_leaky_reference0", "demo_leaky_reference1"]
    client = MlflowClient(uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    logged = client.search_runs(experiments, "tags.`medexp.reference` = '1'")
    assert len(logged) == 1 and logged[0].data.tags["medexp.model"] == "demo_leaky_reference1"

    manifests = [json.loads(path.read_text()) for path in sorted((demo_cache / "demo").glob("reference-*/medexp_demo.json"))]
    halves = {m["reference"]["index"]: set(m["leaked_example_ids"]) for m in manifests if m["settings"]["leak_epochs"] == 1}
    root = demo_benchmark_root(compose(["model=demo_leaky"]).model.demo.bench, demo_cache)
    test, heldout = ({ex.example_id for ex in load_local("demo", root, split).examples} for split in ("test", "heldout"))
    # two complementary halves of the 800 audited examples, each drawing on both splits
    assert halves[0].isdisjoint(halves[1]) and halves[0] | halves[1] == test | heldout
    assert len(halves[0]) == len(halves[1]) == 400
    assert all(half & test and half & heldout for half in halves.values())

    cell = run_medexp("model=demo_leaky", "model.demo.leak_epochs=1", "detector=membership_references",
                      "detector.trained_references=2", "detector.n_permutations=200", "detector.n_bootstrap=50",
                      "detector.shift_permutations=19", "bench.max_examples=150", f"paths.cache_dir={demo_cache}",
                      f"tracking.uri={uri}")
    assert cell.returncode == 0, cell.stdout[-3000:] + cell.stderr[-3000:]
    assert "building demo reference model" not in cell.stdout + cell.stderr  # found in the cache
    metrics = cell_runs(cell, uri)[("demo_leaky", "membership_references")].data.metrics
    assert metrics["n_references"] == 3  # demo_clean, the independent model, and the two references
    assert metrics["p_value"] == pytest.approx(metrics["lira_online_p_value"])
    for attack in ("lira_online", "rmia", "lira"):
        assert 0 <= metrics[f"{attack}_auc"] <= 1 and f"{attack}_tpr_at_fpr_0.0001" in metrics, attack
    assert metrics["fpr_resolution"] == pytest.approx(1 / metrics["n_nonmembers"])


def test_references_need_a_leaky_demo_model(tmp_path):
    from medexp.demo.models import demo_reference_dir

    refused = run_train("models=[demo_clean]", "references=2", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                        cache=tmp_path / "cache")
    assert refused.returncode == 2 and "lists none (e.g. models=[demo_leaky])" in refused.stderr
    with pytest.raises(ValueError, match="leak_epochs=0"):
        demo_reference_dir(compose(["model=demo_clean"]).model.demo, 0, ["test", "heldout"], tmp_path / "cache")
    assert not (tmp_path / "cache" / "demo").exists()  # refused before anything was built
