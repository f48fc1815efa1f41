"""The grid on a real Slurm into a real MLflow tracking server (marker ``cluster``; needs root).

scripts/local_slurm.sh brings up a one-host cluster under a temporary directory, on ports of its
own; ``mlflow server`` runs on a free port with a sqlite store. A two-cell sweep runs through
hydra/launcher=submitit_slurm: every cell must be a Slurm job (its run tagged with the array task)
ending FINISHED under a parent sweep run that ends FINISHED with true counts. Then a cell's job is
requeued mid-scoring (``scontrol requeue``): its first run ends KILLED, the requeued job resumes
from the shards and ends FINISHED with the metrics of an uninterrupted run. Then, without
accounting (sacct has nothing to say), an array task cancelled mid-cell: the command does not wait
for it forever, it ends it as a killed cell after a bounded wait, and a rerun completes the grid.
Both are torn down after. Several minutes on 2 cores: building the two demo models inside the
jobs, Slurm's two-minute hold of a requeued job.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import BOTH, cancelled_task_is_a_killed_cell, environment, fresh_cache, rerun_completes, slurm_cluster
from tests.cluster.conftest import EXCH as EXCH_CELLS
from tests.conftest import REPO, sweep_and_cells

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """SLURM_CONF of a running one-host cluster without accounting, stopped after the module."""
    yield from slurm_cluster(tmp_path_factory.mktemp("slurm"), accounting=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One cache for the module's jobs: the demo models are built once, by the first job."""
    return tmp_path_factory.mktemp("cache")


def _env(slurm: str, cache: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
            "SLURM_CONF": slurm, "MEDEXP_CACHE": str(cache), "PYTHONPATH": str(REPO)}


def _on_slurm(tracking_uri: str, sweep_dir: Path) -> list[str]:
    return ["hydra/launcher=submitit_slurm", "tracking=server", f"tracking.uri={tracking_uri}",
            f"hydra.sweep.dir={sweep_dir}", "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.mem_gb=4", "hydra.launcher.timeout_min=30"]


def test_grid_runs_each_cell_as_a_slurm_job_into_the_tracking_server(slurm, tracking_server, cache, tmp_path):
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "medexp", "-m", "model=demo_clean,demo_leaky", "detector=exch_rank",
         "detector.n_permutations=2000", *_on_slurm(tracking_server, tmp_path / "sweep")],
        cwd=REPO, env=_env(slurm, cache), capture_output=True, text=True, timeout=1500)
    print(f"sweep on Slurm: {time.monotonic() - started:.0f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FINISHED: 2 cells: 2 computed, 0 reused (tracked earlier), 0 failed" in done.stdout

    parent, cells = sweep_and_cells(tracking_server)
    assert parent.info.status == "FINISHED"
    assert {key: parent.data.metrics[key] for key in ("n_cells", "n_computed", "n_failed", "n_lost")} == {
        "n_cells": 2.0, "n_computed": 2.0, "n_failed": 0.0, "n_lost": 0.0}
    assert sorted(run.data.tags["medexp.model"] for run in cells) == ["demo_clean", "demo_leaky"]
    jobs = set()
    for run in cells:
        tags = run.data.tags
        assert run.info.status == "FINISHED", tags.get("medexp.error")
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert re.fullmatch(r"\d+_[01]", tags["medexp.slurm_job_id"]), tags["medexp.slurm_job_id"]
        assert tags["medexp.host"] == socket.gethostname() and int(tags["medexp.pid"]) != os.getpid()
        assert "p_value" in run.data.metrics
        jobs.add(tags["medexp.slurm_job_id"])
    assert len(jobs) == 2 and len({job.split("_")[0] for job in jobs}) == 1  # two tasks of one array
    assert "medexp.slurm_job_id" not in parent.data.tags  # the driver ran outside Slurm


# A small exch cell: 10 shards, each scored in its order and 60 others (about a minute of scoring).
EXCH = ["model=demo_leaky", "detector=exch", "detector.shards=10", "detector.permutations=60"]


def test_a_requeued_cell_resumes_from_its_shards_to_the_uninterrupted_result(slurm, tracking_server, cache, tmp_path):
    from mlflow.tracking import MlflowClient

    scores = cache / "scores"
    before = set(scores.iterdir()) if scores.is_dir() else set()
    env = _env(slurm, cache)
    started = time.monotonic()
    sweep = subprocess.Popen(
        [sys.executable, "-m", "medexp", "-m", *EXCH, *_on_slurm(tracking_server, tmp_path / "sweep")],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while True:  # requeue once some shards, not all, are written
            new = [entry for entry in scores.glob("*") if entry.is_dir() and entry not in before] if scores.is_dir() else []
            written = sum(len(list(entry.glob("shard-*.parquet"))) for entry in new)
            if written >= 2:
                break
            assert sweep.poll() is None and time.monotonic() < deadline, "the cell never wrote a shard"
            time.sleep(1)
        assert written < 10, "the cell finished before it could be requeued"
        job = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, check=True).stdout.split()
        assert len(job) == 1, job
        subprocess.run(["scontrol", "requeue", job[0]], env=env, check=True)
        output, _ = sweep.communicate(timeout=1200)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    print(f"requeued cell on Slurm: {time.monotonic() - started:.0f} s")
    assert sweep.returncode == 0, output[-3000:]
    assert "FINISHED: 1 cells: 1 computed, 0 reused (tracked earlier), 0 failed" in output

    client = MlflowClient(tracking_server)
    experiment = client.get_experiment_by_name("medexp")
    runs = client.search_runs([experiment.experiment_id], "tags.`medexp.detector` = 'exch'",
                              order_by=["attributes.start_time ASC"])
    assert [run.info.status for run in runs] == ["KILLED", "FINISHED"]
    killed, finished = runs
    assert killed.data.tags["medexp.signal"] == "SIGTERM" and killed.data.tags["medexp.slurm_restart_count"] == "0"
    assert finished.data.tags["medexp.slurm_restart_count"] == "1"
    assert finished.data.tags["medexp.slurm_job_id"] == killed.data.tags["medexp.slurm_job_id"] == job[0]
    assert not client.search_runs([experiment.experiment_id], "attributes.status = 'RUNNING'")

    # The same cell uninterrupted, in one process, on a score cache of its own (the demo models shared).
    fresh = tmp_path / "fresh-cache"
    fresh.mkdir()
    (fresh / "demo").symlink_to(cache / "demo")
    reference = subprocess.run(
        [sys.executable, "-m", "medexp", *EXCH, f"tracking.uri=sqlite:///{tmp_path / 'reference.db'}"],
        cwd=REPO, env={**env, "MEDEXP_CACHE": str(fresh)}, capture_output=True, text=True, timeout=900)
    assert reference.returncode == 0, reference.stderr[-3000:]
    local = MlflowClient(f"sqlite:///{tmp_path / 'reference.db'}")
    (uninterrupted,) = local.search_runs([local.get_experiment_by_name("medexp").experiment_id])
    assert finished.data.metrics == uninterrupted.data.metrics  # p-value and every other metric, bit for bit


def test_without_accounting_a_cancelled_task_ends_after_a_bounded_wait_and_a_rerun_completes(slurm, tracking_server,
                                                                                             reference, tmp_path):
    # The case that waited forever: submitit asks only sacct, which fails on every call here.
    expected, models = reference
    cache = fresh_cache(tmp_path / "cache", models)
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    args = ["-m", BOTH, *EXCH_CELLS, *_on_slurm(tracking_server, tmp_path / "sweep"), "tracking.experiment=scancel",
            f"paths.root={tmp_path}"]
    task = cancelled_task_is_a_killed_cell(args, env, cache, "1", tracking_server, "scancel",
                                           "model=demo_leaky,bench=demo,detector=exch,control=none")
    sacct = subprocess.run(["sacct", "-j", task], env=env, capture_output=True, text=True)
    assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr
    rerun_completes(args, env, tracking_server, "scancel", expected, reused=1, computed=1)
