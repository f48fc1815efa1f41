"""The cohort detectors on the offline demo, end to end through ``python -m medexp``.

The demo cohort is three clean models (training seeds 0-2) and two leaky ones (seeds 0 and 1,
the same planted leak). The clean seeds 1-2 and the second leaky model are built on first use.
"""

from __future__ import annotations


import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import cell_runs, run_medexp

pytestmark = [pytest.mark.slow, pytest.mark.extended]

ARTIFACTS = {
    "mink_tail": ["config.yaml", "delta_tail.png", "per_stratum.parquet"],
    "topk_jaccard": ["config.yaml", "per_pair.parquet", "topk_overlap.png"],
    "loss": ["config.yaml", "loss_ranking.parquet", "loss_ranking.png"],
}


@pytest.fixture(scope="module")
def cohort_cells(demo_cache, tmp_path_factory):
    """One sweep: {demo_clean, demo_leaky} x {mink_tail, topk_jaccard, loss}."""
    store = tmp_path_factory.mktemp('cohort-store')
    uri = f"sqlite:///{store / 'mlflow.db'}"
    # a sweep dir of its own: the default (mlruns/hydra/multirun/<date>/<time> in the checkout) is
    # shared by sweeps that start in the same second, as they can on parallel test workers
    result = run_medexp("-m", f"paths.cache_dir={demo_cache}", f"tracking.uri={uri}", f"hydra.sweep.dir={store / 'sweep'}",
                        "model=demo_clean,demo_leaky", "detector=mink_tail,topk_jaccard,loss", timeout=1800)
    runs = cell_runs(result, uri)
    assert len(runs) == 6, result.stdout
    return MlflowClient(uri), runs


@pytest.mark.parametrize("detector", sorted(ARTIFACTS))
def test_cells_log_metrics_and_artefacts(cohort_cells, detector):
    client, runs = cohort_cells
    for model in ("demo_clean", "demo_leaky"):
        run = runs[(model, detector)]
        assert run.info.status == "FINISHED"
        assert {"p_value", "statistic", "n_examples", "flag"} <= set(run.data.metrics)
        assert run.data.metrics["n_examples"] == 400 and run.data.metrics["n_models"] == 5
        assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ARTIFACTS[detector]


def _metrics(runs, model, detector):
    return runs[(model, detector)].data.metrics


def test_mink_tail_flags_the_leaky_model_only(cohort_cells):
    client, runs = cohort_cells
    leaky, clean = _metrics(runs, "demo_leaky", "mink_tail"), _metrics(runs, "demo_clean", "mink_tail")
    assert leaky["flag"] == 1.0 and leaky["p_value"] < 0.01
    assert clean["flag"] == 0.0 and clean["p_value"] > 0.05
    assert leaky["pr_delta_gt_1"] > clean["pr_delta_gt_1"] and leaky["delta_max"] > clean["delta_max"]
    strata = pd.read_parquet(client.download_artifacts(runs[("demo_leaky", "mink_tail")].info.run_id, "per_stratum.parquet"))
    assert set(strata["field"]) == {"all", "answer_type", "content_type", "modality"}
    assert strata.groupby("field")["n"].sum().eq(400).all()  # every field's strata cover the benchmark


def test_loss_flags_the_leaky_model_only(cohort_cells):
    client, runs = cohort_cells
    leaky, clean = _metrics(runs, "demo_leaky", "loss"), _metrics(runs, "demo_clean", "loss")
    assert leaky["flag"] == 1.0 and leaky["p_value"] < 0.01 and leaky["statistic"] > 0.5
    assert clean["flag"] == 0.0 and clean["p_value"] > 0.05 and clean["statistic"] < 0
    ranking = pd.read_parquet(client.download_artifacts(runs[("demo_leaky", "loss")].info.run_id, "loss_ranking.parquet"))
    assert list(ranking["rank"]) == list(range(1, 401)) and ranking["nll"].is_monotonic_increasing
    assert ranking["question"].notna().all()


def test_topk_pairs_the_two_leaky_models(cohort_cells):
    client, runs = cohort_cells
    leaky, clean = _metrics(runs, "demo_leaky", "topk_jaccard"), _metrics(runs, "demo_clean", "topk_jaccard")
    # the cohort-relabel p at its floor (no draw shares as much with a reference), the audit's
    # hypergeometric p far below it
    assert leaky["flag"] == 1.0 and leaky["p_value"] == 1 / (1 + leaky["n_permutations"])
    assert leaky["p_value_hypergeometric"] < 1e-6
    assert clean["flag"] == 0.0 and leaky["max_lift"] > clean["max_lift"]
    pairs = pd.read_parquet(client.download_artifacts(runs[("demo_leaky", "topk_jaccard")].info.run_id, "per_pair.parquet"))
    best = pairs[pairs["involves_target"]].sort_values("jaccard").iloc[-1]
    assert best["model_b"] == "demo_leaky_b"
    assert len(pairs) == 10  # all pairs of five models
