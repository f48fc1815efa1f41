"""The memorization and membership detectors end to end through ``python -m medexp``.

* A tiny trained ViT pair (a user config folder, two seeds) whose canaries are seen many times:
  memorised, so detected; the pair is trained on first use by the cell itself.
* The demo VLM pair: demo_leaky (which trained on the demo test split) against its independent
  demo_clean, the heldout split as non-members: detected. And the null: demo_clean_b (another
  seed, never saw the test split) against demo_clean: not detected.
"""

from __future__ import annotations


import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import cell_runs, run_medexp
from tests.train.tiny import SMALL_ARCHITECTURE, write_config_dir

pytestmark = [pytest.mark.slow, pytest.mark.long]


@pytest.fixture(scope="module")
def tiny_cells(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-cells")
    # 60 passes over the canaries at 32 pixels: memorised (members' M(x) ~1.7, non-members' ~-0.3)
    conf = write_config_dir(root / "conf", epochs=60, image_size=32, architecture=SMALL_ARCHITECTURE)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    # a sweep dir of its own (the default one is shared by sweeps starting in the same second)
    result = run_medexp("-m", "--config-dir", str(conf), f"paths.cache_dir={root / 'cache'}", f"tracking.uri={uri}",
                        f"hydra.sweep.dir={root / 'sweep'}",
                        "model=tiny_vit", "bench=tiny_findings", "detector=memorization,membership", timeout=1200)
    runs = cell_runs(result, uri)
    assert set(runs) == {("tiny_vit-candidate-s1", "memorization"), ("tiny_vit-candidate-s1", "membership")}
    return MlflowClient(uri), {detector: run for (_, detector), run in runs.items()}


def test_trained_pair_memorization_is_detected_per_class(tiny_cells):
    client, runs = tiny_cells
    run = runs["memorization"]
    metrics = run.data.metrics
    assert metrics["n_pairs"] == 2 and metrics["n_members"] == 9 and metrics["n_nonmembers"] == 9
    assert metrics["m_mean_members"] > metrics["m_mean_nonmembers"] and metrics["p_value"] < 0.05
    assert {"class_m.normal", "class_m.one_lesion", "class_m.two_lesions", "class_m.three_lesions"} <= set(metrics)
    assert 0 <= metrics["candidate_test_accuracy"] <= 1 and "rarity_spearman_rho" in metrics
    assert {"config.yaml", "per_class.parquet", "per_example.parquet", "memorization_per_class.png",
            "memorization_vs_frequency.png"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    classes = pd.read_parquet(client.download_artifacts(run.info.run_id, "per_class.parquet"))
    assert classes["rank"].tolist() == [1, 2, 3, 4] and classes["m_mean"].is_monotonic_decreasing
    assert classes["n_canaries"].sum() == 9


def test_trained_pair_membership_attacks(tiny_cells):
    client, runs = tiny_cells
    metrics = runs["membership"].data.metrics
    for attack in ("loss", "independent_loss", "confidence_ratio", "mx", "lira"):
        assert {f"{attack}_auc", f"{attack}_auc_ci_low", f"{attack}_p_value", f"{attack}_tpr_at_fpr_0.01",
                f"{attack}_tpr_at_fpr_0.001", f"{attack}_youden_accuracy"} <= set(metrics)
    assert metrics["statistic"] == metrics["mx_auc"] > 0.6
    assert metrics["n_references"] == 2  # the two seeds' independent models
    attacks = pd.read_parquet(client.download_artifacts(runs["membership"].info.run_id, "attacks.parquet"))
    assert set(attacks["attack"]) == {"loss", "independent_loss", "confidence_ratio", "mx", "lira"}


@pytest.fixture(scope="module")
def vlm_cells(demo_cache, tmp_path_factory):
    store = tmp_path_factory.mktemp('vlm-cells')
    uri = f"sqlite:///{store / 'mlflow.db'}"
    leaky = run_medexp("-m", f"paths.cache_dir={demo_cache}", f"tracking.uri={uri}", f"hydra.sweep.dir={store / 'sweep'}",
                       "model=demo_leaky",
                       "detector=memorization,membership", timeout=1800)
    runs = cell_runs(leaky, uri)
    for detector in ("memorization", "membership"):  # one process each: detector.pairs is theirs only
        null = run_medexp(f"paths.cache_dir={demo_cache}", f"tracking.uri={uri}", "model=demo_clean_b",
                          f"detector={detector}", "detector.pairs=[{independent:demo_clean}]", timeout=1800)
        runs.update(cell_runs(null, uri))
    return MlflowClient(uri), runs


def test_the_leaky_vlms_canaries_are_detected(vlm_cells):
    _, runs = vlm_cells
    memorization = runs[("demo_leaky", "memorization")].data.metrics
    membership = runs[("demo_leaky", "membership")].data.metrics
    assert memorization["n_members"] == 400 and memorization["n_nonmembers"] == 400
    assert memorization["flag"] == 1.0 and memorization["m_mean_members"] > memorization["m_mean_nonmembers"]
    # measured: loss 0.74, mx 0.69, lira 0.75; TPR at 1% FPR only 0.01-0.04, the low-FPR view
    assert membership["flag"] == 1.0 and membership["mx_auc_ci_low"] > 0.6 and membership["loss_auc"] > 0.65
    # members and non-members come from one generator: the independent model cannot tell them apart
    assert membership["independent_loss_auc_ci_low"] < 0.5 < membership["independent_loss_auc_ci_high"]
    # nor can a classifier on the inputs alone (text and image statistics): no shift confounds the attacks
    assert membership["shift_confounded"] == 0 and abs(membership["shift_auc"] - 0.5) < 0.06
    assert membership["shift_uses_numeric"] == 1


def test_the_leaky_vlms_members_are_tested_one_by_one(vlm_cells):
    client, runs = vlm_cells
    run = runs[("demo_leaky", "membership")]
    members = pd.read_parquet(client.download_artifacts(run.info.run_id, "member_discoveries.parquet"))
    assert len(members) == 400 and members["conformal_p"].is_monotonic_increasing
    # with 400 non-members no conformal p falls below 1/401
    assert members["conformal_p"].min() >= 1 / 401 and (members["bh_q"] >= members["conformal_p"]).all()
    assert run.data.metrics["n_memorised_at_fdr"] == members["discovered"].sum()
    assert (members.loc[members["discovered"], "bh_q"] <= 0.1).all()


def test_a_clean_model_of_another_seed_is_not_flagged(vlm_cells):
    _, runs = vlm_cells
    for detector in ("memorization", "membership"):
        metrics = runs[("demo_clean_b", detector)].data.metrics
        assert metrics["flag"] == 0.0 and metrics["p_value"] > 0.01, detector
    # nor is any of its members named as memorised at FDR 0.1 (measured: smallest BH q 0.67)
    assert runs[("demo_clean_b", "membership")].data.metrics["n_memorised_at_fdr"] == 0
