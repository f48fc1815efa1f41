"""The Slurm launcher's bounds on a real Slurm (issue 57; marker ``cluster``, needs root): a job held
by an administrator and a job its partition's time limit refuses are cancelled within their bounds
and named with their reasons; with the controller stopped mid-cell the job's state is unknown, its
cell run stays RUNNING (the job runs on: the cell ends it itself once the controller is back);
a normal two-cell sweep still exits 0 with every job recorded COMPLETED. A one-host cluster
without accounting (scripts/local_slurm.sh), a tracking server; a few minutes on 2 cores. The
same states against a scripted Slurm, in the default suite: tests/runner/test_slurm_launcher.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import SLURM, cell_runs, environment, finish, headline, slurm_cluster, start

pytestmark = pytest.mark.cluster

CELL = ["detector=exch_rank", "detector.n_permutations=200"]
BOUNDS = ["hydra.launcher.wait.poll_s=2", "hydra.launcher.wait.held_s=20", "hydra.launcher.wait.unrunnable_s=20",
          "hydra.launcher.wait.silent_s=15", "hydra.launcher.wait.cancel_wait_s=10"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """SLURM_CONF of a one-host cluster without accounting, stopped after the module."""
    yield from slurm_cluster(tmp_path_factory.mktemp("slurm-bounds"), accounting=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")  # the demo models, built once by the first job


def on_slurm(uri: str, tmp_path: Path, experiment: str, *extra: str) -> list[str]:
    return ["hydra/launcher=submitit_slurm", "tracking=server", f"tracking.uri={uri}",
            f"tracking.experiment={experiment}", f"hydra.sweep.dir={tmp_path / 'sweep'}", f"paths.root={tmp_path}",
            "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2",
            "hydra.launcher.timeout_min=30", *BOUNDS, *extra]


def squeue(env: dict[str, str]) -> list[list[str]]:
    done = subprocess.run(["squeue", "-h", "--array", "-o", "%i %T %r"], env=env, capture_output=True, text=True,
                          check=True)
    return [line.split(" ", 2) for line in done.stdout.splitlines()]


def job_ends(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "sweep" / "medexp_job_ends.json").read_text())


def test_a_normal_two_cell_sweep_exits_0_with_each_job_recorded_completed(slurm, tracking_server, cache, tmp_path):
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    code, out = finish(start("-m", "model=demo_clean,demo_leaky", *CELL, *on_slurm(tracking_server, tmp_path, "normal"),
                             env=env), timeout=1200)
    assert code == 0, out[-3000:]
    assert headline(out).endswith("FINISHED: 2 cells: 2 computed, 0 reused (tracked earlier), 0 failed")
    assert {(end["state"], end["confirmed"]) for end in job_ends(tmp_path).values()} == {("COMPLETED", True)}


def test_a_job_held_by_an_administrator_is_cancelled_within_its_bound_and_named(slurm, tracking_server, cache,
                                                                                tmp_path):
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    sweep = start("-m", "model=demo_clean", *CELL, *on_slurm(tracking_server, tmp_path, "held"),
                  "+hydra.launcher.additional_parameters={hold:true}", env=env)  # submitted held: it cannot start
    deadline = time.monotonic() + 120
    while not squeue(env):
        assert sweep.poll() is None and time.monotonic() < deadline, "the job was never queued"
        time.sleep(0.5)
    ((job, _, _),) = squeue(env)
    subprocess.run(["scontrol", "hold", job], env=env, check=True)  # as root: an administrator's hold
    assert squeue(env) == [[job, "PENDING", "JobHeldAdmin"]]
    held = time.monotonic()
    code, out = finish(sweep, timeout=300)
    print(f"held job: the command exited {time.monotonic() - held:.1f} s after the hold")
    assert code == 1, out[-3000:]
    assert f"launcher: job {job} held (JobHeldAdmin) for 20 s; cancelled, and Slurm shows it ended (CANCELLED)" in out
    (end,) = job_ends(tmp_path).values()
    assert (end["state"], end["confirmed"], end["reason"]) == ("CANCELLED", True, "JobHeldAdmin")
    assert time.monotonic() - held < 20 + 30  # the bound, a poll, the cancel and the summary
    assert not squeue(env) or squeue(env)[0][1] == "CANCELLED"


def test_a_job_its_partition_cannot_run_is_cancelled_and_named(slurm, tracking_server, cache, tmp_path):
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    subprocess.run(["scontrol", "update", "partitionname=local", "maxtime=10"], env=env, check=True)
    try:  # the cell asks 30 minutes of a partition that allows 10
        code, out = finish(start("-m", "model=demo_clean", *CELL, *on_slurm(tracking_server, tmp_path, "ptl"), env=env),
                           timeout=300)
    finally:
        subprocess.run(["scontrol", "update", "partitionname=local", "maxtime=unlimited"], env=env, check=True)
    assert code == 1, out[-3000:]
    assert ("cannot run as submitted (PartitionTimeLimit) for 20 s; cancelled, and Slurm shows it ended (CANCELLED)"
            in out)
    (end,) = job_ends(tmp_path).values()
    assert (end["state"], end["confirmed"], end["reason"]) == ("CANCELLED", True, "PartitionTimeLimit")


def test_with_the_controller_stopped_the_job_is_unknown_and_its_run_is_left_to_finish(slurm, tracking_server, cache,
                                                                                     tmp_path):
    env = environment(SLURM_CONF=slurm, MEDEXP_CACHE=str(cache))
    state = Path(slurm).parent
    sweep = start("-m", "model=demo_leaky", "detector=exch", "detector.shards=10", "detector.permutations=60",
                  *on_slurm(tracking_server, tmp_path, "silent"), env=env)
    outcome = tmp_path / "sweep" / "0" / "medexp_cell.json"
    deadline = time.monotonic() + 600
    while not (outcome.is_file() and json.loads(outcome.read_text())["status"] == "RUNNING"):
        assert sweep.poll() is None and time.monotonic() < deadline, "the cell never started"
        time.sleep(1)
    os.kill(int((state / "run" / "slurmctld.pid").read_text()), 15)  # the controller goes; slurmd and the job stay
    stopped = time.monotonic()
    code, out = finish(sweep, timeout=600)
    print(f"controller stopped: the command exited {time.monotonic() - stopped:.1f} s later")
    assert code == 1, out[-3000:]
    assert headline(out).endswith("FAILED: 1 cells: 0 computed, 0 reused (tracked earlier), 0 failed, 1 job in an "
                                  "unknown state")
    assert "Slurm did not confirm its job ended, so its run stays RUNNING" in out
    (run,) = cell_runs(tracking_server, "silent")
    assert run.info.status == "RUNNING"  # not ended KILLED: its job may still compute, and does
    (end,) = job_ends(tmp_path).values()
    assert not end["confirmed"]

    conf = (state / "slurm.conf").read_text()  # the controller back, on the cluster's own ports
    ports = {name: re.search(rf"^{name}=(\d+)", conf, re.M).group(1) for name in ("SlurmctldPort", "SlurmdPort")}
    up = subprocess.run([str(SLURM), "up"], env={**env, "MEDEXP_SLURM_DIR": str(state),
                                                   "MEDEXP_SLURMCTLD_PORT": ports["SlurmctldPort"],
                                                   "MEDEXP_SLURMD_PORT": ports["SlurmdPort"]},
                        capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    deadline = time.monotonic() + 900
    while (run := cell_runs(tracking_server, "silent")[0]).info.status == "RUNNING":
        assert time.monotonic() < deadline, "the cell never ended its run"
        time.sleep(2)
    assert run.info.status == "FINISHED" and "p_value" in run.data.metrics  # the job ran on, and finished the cell
