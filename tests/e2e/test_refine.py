"""``python -m medexp.refine``: a tracked exch_rank cell refined from its saved scalars."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO, parse_summary, run_medexp

pytestmark = pytest.mark.slow


def _refine(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "medexp.refine", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


def test_refine_logs_refined_and_pooled_p_values(demo_cache, tracking_uri):
    from medexp.kernel.hashing import derive_seed
    from medexp.refine import refine_run
    from medexp.stats import rank_exchangeability

    cell = run_medexp(f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}", "detector=exch_rank",
                      "detector.n_permutations=500")
    assert cell.returncode == 0, cell.stderr[-3000:]
    run_id = parse_summary(cell.stdout)["run_id"]
    client = MlflowClient(tracking_uri)
    before = client.get_run(run_id).data.metrics

    refined = _refine(run_id, "--permutations", "3000", "--tracking-uri", tracking_uri)
    assert refined.returncode == 0, refined.stderr[-3000:]
    assert f"run {run_id}: p_value=" in refined.stdout and "refined p=" in refined.stdout

    after = client.get_run(run_id).data.metrics
    assert after["p_value"] == before["p_value"]  # the cell's own p-value is kept
    assert after["n_permutations_refined"] == 3000 and after["n_permutations_pooled"] == 3500
    assert after["p_value_pooled"] == pytest.approx(
        (1 + before["n_exceed"] + after["n_exceed_refined"]) / 3501, abs=0)
    # The refined draw reproduces from the saved table and the cell seed alone.
    table = pd.read_parquet(client.download_artifacts(run_id, "per_example.parquet"))
    seed = derive_seed(int(client.get_run(run_id).data.tags["medexp.seed"]), "refine")
    expected = rank_exchangeability(table["sum_logprob"].to_numpy(), 3000, seed)
    assert after["p_value_refined"] == expected.p_value
    assert refine_run(run_id, 3000, tracking_uri).p_value_refined == expected.p_value
    assert seed != int(before["permutation_seed"])  # not the cell's own stream


@pytest.mark.extended
def test_refine_refuses_other_detectors_and_unfinished_runs(demo_cache, tracking_uri):
    loss = run_medexp(f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}", "detector=loss",
                      "detector.cohort=[demo_clean,demo_clean_b]", "detector.n_permutations=100")
    assert loss.returncode == 0, loss.stderr[-3000:]
    refused = _refine(parse_summary(loss.stdout)["run_id"], "--tracking-uri", tracking_uri)
    assert refused.returncode == 2 and "is a 'loss' run; refine reruns only exch_rank" in refused.stderr

    failed = run_medexp(f"paths.cache_dir={demo_cache}", f"tracking.uri={tracking_uri}", "detector=exch_rank",
                        "bench.max_examples=2")
    assert failed.returncode != 0
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("medexp")
    (failed_run,) = client.search_runs([experiment.experiment_id], "attributes.status = 'FAILED'")
    refused = _refine(failed_run.info.run_id, "--tracking-uri", tracking_uri)
    assert refused.returncode == 2 and "is FAILED, not FINISHED" in refused.stderr
    assert "no run 'nope'" in _refine("nope", "--tracking-uri", tracking_uri).stderr
