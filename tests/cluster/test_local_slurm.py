"""The grid on a real Slurm into a real MLflow tracking server (marker ``cluster``; needs root).

scripts/local_slurm.sh brings up a one-host cluster under a temporary directory, on ports of its
own; ``mlflow server`` runs on a free port with a sqlite store. A two-cell sweep runs through
hydra/launcher=submitit_slurm: every cell must be a Slurm job (its run tagged with the array task)
ending FINISHED under a parent sweep run that ends FINISHED with true counts. Both are torn down
after. About 4 minutes on 2 cores, most of it building the two demo models inside the jobs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.cluster

SCRIPT = REPO / "scripts" / "local_slurm.sh"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """SLURM_CONF of a running one-host cluster, stopped after the module."""
    if os.geteuid() != 0:
        pytest.skip("the local Slurm cluster needs root (scripts/local_slurm.sh runs munged, slurmctld and slurmd)")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        pytest.skip("Slurm is not installed and there is no apt-get to install it")
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "MEDEXP_SLURM_DIR": str(state),
           "MEDEXP_SLURMCTLD_PORT": str(_free_port()), "MEDEXP_SLURMD_PORT": str(_free_port())}
    up = subprocess.run([str(SCRIPT), "up"], env=env, capture_output=True, text=True, timeout=900)
    if up.returncode != 0 and "could not install" in up.stderr:
        pytest.skip(f"Slurm packages could not be installed: {up.stderr.strip()}")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield str(state / "slurm.conf")
    finally:
        down = subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """The URI of an ``mlflow server`` on a free port of 127.0.0.1 with a sqlite store."""
    import requests

    store = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = open(store / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
         "--artifacts-destination", str(store / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, cwd=store)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{uri}/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (store / "server.log").read_text()
            time.sleep(1)
        yield uri
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def test_grid_runs_each_cell_as_a_slurm_job_into_the_tracking_server(slurm, tracking_server, tmp_path):
    from mlflow.tracking import MlflowClient

    env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
           "SLURM_CONF": slurm, "MEDEXP_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    sweep_dir = tmp_path / "sweep"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "medexp", "-m", "model=demo_clean,demo_leaky", "detector=exch_rank",
         "detector.n_permutations=2000", "hydra/launcher=submitit_slurm", "tracking=server",
         f"tracking.uri={tracking_server}", f"hydra.sweep.dir={sweep_dir}",
         "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=4",
         "hydra.launcher.timeout_min=30"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    print(f"sweep on Slurm: {time.monotonic() - started:.0f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FINISHED: 2 cells: 2 computed, 0 reused (tracked earlier), 0 failed" in done.stdout

    client = MlflowClient(tracking_server)
    experiment = client.get_experiment_by_name("medexp")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [run for run in runs if run.data.tags.get("medexp.kind") == "sweep"]
    cells = [run for run in runs if "medexp.cell_key" in run.data.tags]
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
